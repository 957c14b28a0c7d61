package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// timeoutOf reads timeout_seconds from a job's or a task's JSON.
func timeoutOf(t *testing.T, r response) int {
	t.Helper()
	var v struct {
		TimeoutSeconds *int `json:"timeout_seconds"`
	}
	r.decode(t, &v)
	if v.TimeoutSeconds == nil {
		t.Fatalf("no timeout_seconds in %s", r.body)
	}
	return *v.TimeoutSeconds
}

// timeout_seconds is a setting of the job, part of the request's meaning
// for Idempotency-Key, and handed to workers with every claimed task.
func TestTimeoutSecondsEchoed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	key := []string{"Idempotency-Key", "timeout-1"}
	r := b.mustStatus(b.client("POST", "/jobs", jobBody(1, map[string]any{"timeout_seconds": 90}), key...), http.StatusCreated)
	if got := timeoutOf(t, r); got != 90 {
		t.Errorf("created job: timeout_seconds %d, want 90", got)
	}
	var j job
	r.decode(t, &j)
	if got := timeoutOf(t, b.client("GET", "/jobs/"+j.JobID, nil)); got != 90 {
		t.Errorf("GET /jobs/{id}: timeout_seconds %d, want 90", got)
	}
	var list struct {
		Jobs []struct {
			TimeoutSeconds *int `json:"timeout_seconds"`
		} `json:"jobs"`
	}
	b.mustStatus(b.client("GET", "/jobs", nil), http.StatusOK).decode(t, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].TimeoutSeconds == nil || *list.Jobs[0].TimeoutSeconds != 90 {
		t.Errorf("GET /jobs: %s, want one job with timeout_seconds 90", b.client("GET", "/jobs", nil).body)
	}
	// The same request replays; another timeout is another request.
	b.mustStatus(b.client("POST", "/jobs", jobBody(1, map[string]any{"timeout_seconds": 90}), key...), http.StatusOK)
	if r := b.client("POST", "/jobs", jobBody(1, map[string]any{"timeout_seconds": 91}), key...); r.status != http.StatusConflict || r.errCode() != "conflict" {
		t.Errorf("same key, other timeout: %s, want 409 conflict", r)
	}
	if r := b.client("POST", "/jobs", jobBody(1, nil), key...); r.status != http.StatusConflict {
		t.Errorf("same key, no timeout: %s, want 409 conflict", r)
	}

	cr := b.mustStatus(b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w"}), http.StatusOK)
	if got := timeoutOf(t, cr); got != 90 {
		t.Errorf("claimed task: timeout_seconds %d, want 90", got)
	}
	var tk task
	cr.decode(t, &tk)
	if got := timeoutOf(t, b.client("GET", "/tasks/"+tk.TaskID, nil)); got != 90 {
		t.Errorf("GET /tasks/{id}: timeout_seconds %d, want 90", got)
	}
	var batch struct{ Tasks []map[string]any }
	b.createJob(2, nil)
	b.mustStatus(b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w", "max_tasks": 2}), http.StatusOK).decode(t, &batch)
	for _, x := range batch.Tasks {
		if x["timeout_seconds"] != float64(0) {
			t.Errorf("claimed task of a job without a timeout: timeout_seconds %v, want 0", x["timeout_seconds"])
		}
	}
}

// An attempt's deadline is its claim plus the job's timeout: heartbeats
// never extend the lease past it; from it on, the attempt's heartbeats,
// results, failures and logs are 409 lease_lost and record nothing; the
// reaper turns it into a retryable failure "timed out after N s", retried
// after the backoff, and the next attempt can complete.
func TestTimeoutEndsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg, noLoops: true, frozen: true})
			j := b.createJob(1, map[string]any{"timeout_seconds": 30, "lease_seconds": 60, "max_attempts": 3})
			tk, ok := b.claim("w", nil)
			if !ok {
				t.Fatal("no task to claim")
			}
			// The claim's lease (60 s) is capped at the deadline (30 s).
			deadline := *tk.LeaseExpiresAt
			claimed := deadline.Add(-30 * time.Second)
			lease := map[string]any{"worker_id": "w", "attempt": 1}
			path := "/tasks/" + tk.TaskID

			b.clock.Advance(10 * time.Second)
			var hb struct {
				LeaseExpiresAt time.Time `json:"lease_expires_at"`
			}
			b.mustStatus(b.worker("POST", path+"/heartbeat", lease), http.StatusOK).decode(t, &hb)
			if !hb.LeaseExpiresAt.Equal(deadline) {
				t.Errorf("heartbeat 10 s in: lease expires %v after the claim, want the deadline, 30 s", hb.LeaseExpiresAt.Sub(claimed))
			}
			b.mustStatus(b.worker("POST", path+"/logs", map[string]any{"worker_id": "w", "attempt": 1, "lines": []string{"working"}}), http.StatusNoContent)

			b.clock.Advance(20 * time.Second) // at the deadline
			out := "id,score\na,1\n"
			for _, c := range []struct {
				what, path string
				body       map[string]any
			}{
				{"heartbeat", "/heartbeat", lease},
				{"result", "/result", result("w", 1, out)},
				{"failure", "/failure", map[string]any{"worker_id": "w", "attempt": 1, "error": "killed"}},
				{"release", "/failure", map[string]any{"worker_id": "w", "attempt": 1, "error": "shutting down", "release": true}},
				{"logs", "/logs", map[string]any{"worker_id": "w", "attempt": 1, "lines": []string{"late"}}},
			} {
				r := b.worker("POST", path+c.path, c.body)
				if r.status != http.StatusConflict || r.errCode() != "lease_lost" {
					t.Errorf("%s at the deadline: %s, want 409 lease_lost", c.what, r)
				}
			}
			var batch struct {
				Results []struct {
					Status int `json:"status"`
					Error  struct{ Code string }
				} `json:"results"`
			}
			b.mustStatus(b.worker("POST", "/tasks/results", map[string]any{"results": []map[string]any{
				{"task_id": tk.TaskID, "worker_id": "w", "attempt": 1, "output": out},
			}}), http.StatusOK).decode(t, &batch)
			if len(batch.Results) != 1 || batch.Results[0].Status != http.StatusConflict || batch.Results[0].Error.Code != "lease_lost" {
				t.Errorf("batch result at the deadline: %+v, want 409 lease_lost", batch.Results)
			}
			got := b.getTask(tk.TaskID)
			if got.State != "leased" || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(deadline) || got.Error != nil {
				t.Fatalf("after the refused writes the task is %+v; want leased until the deadline, as before", got)
			}
			if r := b.mustStatus(b.client("GET", path+"/logs", nil), http.StatusOK); !strings.Contains(string(r.body), "working\n") || strings.Contains(string(r.body), "late") {
				t.Errorf("log %q, want only the line sent before the deadline", r.body)
			}

			if n, err := b.engine.ExpireLeases(t.Context()); err != nil || n != 1 {
				t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
			}
			got = b.getTask(tk.TaskID)
			if got.State != "pending" || got.Attempt != 1 || got.Error == nil || *got.Error != "timed out after 30 s" {
				t.Fatalf("after the reaper the task is %+v; want pending after attempt 1, error \"timed out after 30 s\"", got)
			}
			if jj := b.getJob(j.JobID); jj.Status != "running" || jj.Error != nil {
				t.Fatalf("job after a timed-out attempt: %+v, want running", jj)
			}
			// The usual backoff (0.5-1 s after attempt 1) before the retry.
			if _, ok := b.claim("w2", nil); ok {
				t.Fatal("the timed-out task was claimable before its backoff passed")
			}
			b.clock.Advance(time.Second)
			again, ok := b.claim("w2", nil)
			if !ok || again.TaskID != tk.TaskID || again.Attempt != 2 {
				t.Fatalf("after the backoff claimed %+v, want %s attempt 2", again, tk.TaskID)
			}
			if want := b.clock.Now().UTC().Truncate(time.Microsecond).Add(30 * time.Second); !again.LeaseExpiresAt.Equal(want) {
				t.Errorf("attempt 2's lease expires at %v, want its own deadline %v", again.LeaseExpiresAt, want)
			}
			// The first attempt stays refused.
			if r := b.worker("POST", path+"/result", result("w", 1, out)); r.status != http.StatusConflict || r.errCode() != "lease_lost" {
				t.Errorf("attempt 1's result during attempt 2: %s, want 409 lease_lost", r)
			}
			b.mustStatus(b.worker("POST", path+"/result", result("w2", 2, out)), http.StatusOK)
			if _, err := b.engine.StitchReadyJobs(t.Context()); err != nil {
				t.Fatal(err)
			}
			if jj := b.getJob(j.JobID); jj.Status != "completed" {
				t.Fatalf("job after attempt 2 completed: %+v", jj)
			}
		})
	}
}

// With no attempt left, a timed-out attempt fails the task and its job,
// whose error names the timeout.
func TestTimeoutFailsTheJobOnTheLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true, frozen: true})
	j := b.createJob(2, map[string]any{"timeout_seconds": 5, "max_attempts": 1})
	tk, _ := b.claim("w", nil)
	b.clock.Advance(5 * time.Second)
	if n, err := b.engine.ExpireLeases(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
	}
	got := b.getTask(tk.TaskID)
	if got.State != "failed" || got.Error == nil || *got.Error != "timed out after 5 s" {
		t.Fatalf("task after its only attempt timed out: %+v", got)
	}
	jj := b.getJob(j.JobID)
	if jj.Status != "failed" || jj.Error == nil || !strings.Contains(*jj.Error, tk.TaskID) || !strings.Contains(*jj.Error, "timed out after 5 s") {
		t.Fatalf("job after its task timed out for good: %+v; want failed, naming the task and the timeout", jj)
	}
	if jj.Tasks.Failed != 1 || jj.Tasks.Cancelled != 1 {
		t.Errorf("job counts %+v, want 1 failed and 1 cancelled", jj.Tasks)
	}
	// The job is over: the worker is told to stop, as for any failed job.
	r := b.worker("POST", "/tasks/"+tk.TaskID+"/heartbeat", map[string]any{"worker_id": "w", "attempt": 1})
	if r.status != http.StatusConflict || r.errCode() != "cancelled" {
		t.Errorf("heartbeat after the job failed: %s, want 409 cancelled", r)
	}
	r = b.worker("POST", "/tasks/"+tk.TaskID+"/logs", map[string]any{"worker_id": "w", "attempt": 1, "lines": []string{"late"}})
	if r.status != http.StatusConflict {
		t.Errorf("logs of the timed-out attempt after it failed the task: %s, want 409", r)
	}
}

// A job without a timeout keeps the leases as they were: a heartbeat
// renews by lease_seconds, however long the attempt has run.
func TestNoTimeoutNoDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true, frozen: true})
	b.createJob(1, map[string]any{"lease_seconds": 60})
	tk, _ := b.claim("w", nil)
	for range 5 {
		b.clock.Advance(50 * time.Second)
		var hb struct {
			LeaseExpiresAt time.Time `json:"lease_expires_at"`
		}
		b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/heartbeat", map[string]any{"worker_id": "w", "attempt": 1}), http.StatusOK).decode(t, &hb)
		if want := b.clock.Now().UTC().Truncate(time.Microsecond).Add(time.Minute); !hb.LeaseExpiresAt.Equal(want) {
			t.Fatalf("heartbeat: lease expires %v, want %v", hb.LeaseExpiresAt, want)
		}
	}
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w", 1, "id,score\na,1\n")), http.StatusOK)
}
