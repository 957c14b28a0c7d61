package httpapi_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	for _, path := range []string{"/health", "/ready"} {
		r := b.do("GET", path, "", nil)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"status"`) {
			t.Errorf("GET %s = %s, want 200 with a status", path, r)
		}
	}
	if r := b.do("GET", "/health", "", nil); string(r.body) != "{\"status\":\"ok\"}\n" {
		t.Errorf("GET /health body %q", r.body)
	}
	b.store.Close()
	if r := b.do("GET", "/ready", "", nil); r.status != http.StatusServiceUnavailable || r.errCode() != "unavailable" {
		t.Errorf("GET /ready with the database closed = %s, want 503 unavailable", r)
	}
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg})
			j := b.createJob(3, map[string]any{"top_k": 2, "name": "lifecycle", "parameters": map[string]any{"query": "ff"}})
			if j.Status != "pending" || j.Tasks.Total != 3 || j.Tasks.Pending != 3 || j.Progress != 0 || j.TopK != 2 || j.Order != "desc" {
				t.Fatalf("new job %+v", j)
			}
			if !strings.HasPrefix(j.JobID, "s0:") {
				t.Errorf("job id %q does not start with the shard", j.JobID)
			}
			outputs := []string{"id,score\na,0.5\nb,0.9\n", "id,score\nc,0.9\nd,0.1\n", "id,score\ne,1\n"}
			for i := range 3 {
				tk, ok := b.claim("w1", nil)
				if !ok {
					t.Fatalf("claim %d: no task", i)
				}
				if tk.ChunkIndex != i || tk.Attempt != 1 || tk.JobID != j.JobID || tk.State != "leased" || tk.TopK != 2 ||
					string(tk.Parameters) != `{"query":"ff"}` || tk.Input.URL != fmt.Sprintf("https://data.example.org/c%d.csv", i) ||
					len(tk.Input.SHA256) != 64 || tk.LeaseExpiresAt == nil || !tk.HasHeader {
					t.Fatalf("claimed %+v", tk)
				}
				if i == 0 {
					if got := b.getJob(j.JobID); got.Status != "running" || got.Tasks.Leased != 1 {
						t.Fatalf("after first lease job is %s with %d leased, want running with 1", got.Status, got.Tasks.Leased)
					}
				}
				var hb struct {
					LeaseExpiresAt time.Time `json:"lease_expires_at"`
				}
				b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/heartbeat", map[string]any{"worker_id": "w1", "attempt": 1}), 200).decode(t, &hb)
				if hb.LeaseExpiresAt.Before(*tk.LeaseExpiresAt) {
					t.Errorf("heartbeat moved the lease back: %v < %v", hb.LeaseExpiresAt, tk.LeaseExpiresAt)
				}
				var done task
				b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w1", 1, outputs[i])), 200).decode(t, &done)
				if done.State != "completed" {
					t.Fatalf("after result task is %s", done.State)
				}
			}
			if _, ok := b.claim("w1", nil); ok {
				t.Fatal("claimed a fourth task of a three-chunk job (the stitch root must never reach workers)")
			}
			final := b.waitJob(j.JobID, "completed")
			if final.Progress != 1 || final.Tasks.Completed != 3 || final.FinishedAt == nil || final.Error != nil {
				t.Fatalf("completed job %+v", final)
			}
			r := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), 200)
			if want := "id,score\ne,1\nb,0.9\n"; string(r.body) != want {
				t.Fatalf("result %q, want %q (ties by chunk index)", r.body, want)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
				t.Errorf("result Content-Type %q, want text/csv", ct)
			}
		})
	}
}

func storeName(pg bool) string {
	if pg {
		return "postgres"
	}
	return "sqlite"
}

func TestClaimOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	old := b.createJob(2, nil)
	b.clock.Advance(time.Second)
	young := b.createJob(2, nil)
	b.clock.Advance(time.Second)
	urgent := b.createJob(1, map[string]any{"priority": 5})
	low := b.createJob(1, map[string]any{"priority": -5})
	// Fair share (the default) within one account: priority, then the job
	// with the fewest leased tasks, then the oldest job, then chunk index.
	want := []string{urgent.JobID + "#0", old.JobID + "#0", young.JobID + "#0", old.JobID + "#1", young.JobID + "#1", low.JobID + "#0"}
	for i, w := range want {
		tk, ok := b.claim("w", nil)
		if got := fmt.Sprintf("%s#%d", tk.JobID, tk.ChunkIndex); !ok || got != w {
			t.Fatalf("claim %d got %s, want %s", i, got, w)
		}
	}
}

func TestClaimWorkloadsFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	b.createJob(1, map[string]any{"workload": "docking"})
	tan := b.createJob(1, map[string]any{"workload": "tanimoto", "priority": -1})
	if _, ok := b.claim("w", map[string]any{"workloads": []string{"other"}}); ok {
		t.Fatal("claimed a task of a workload the worker does not run")
	}
	tk, ok := b.claim("w", map[string]any{"workloads": []string{"tanimoto", "other"}})
	if !ok || tk.JobID != tan.JobID || tk.Workload != "tanimoto" {
		t.Fatalf("claim with workloads [tanimoto] got %+v", tk)
	}
	if tk, ok := b.claim("w", nil); !ok || tk.Workload != "docking" {
		t.Fatalf("claim without workloads got %+v, want the docking task", tk)
	}
}

func TestClaimLongPoll(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	type got struct {
		r   response
		dur time.Duration
	}
	ch := make(chan got, 1)
	go func() {
		start := time.Now()
		r := b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w", "wait_seconds": 30})
		ch <- got{r, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)
	j := b.createJob(1, nil)
	res := <-ch
	var tk task
	b.mustStatus(res.r, 200).decode(t, &tk)
	if tk.JobID != j.JobID {
		t.Fatalf("long poll got %+v, want a task of %s", tk, j.JobID)
	}
	// With nothing to claim, wait_seconds ends in 204.
	r := b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w", "wait_seconds": 0.2})
	b.mustStatus(r, http.StatusNoContent)
}

func TestBatchClaimAndResults(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	j := b.createJob(5, map[string]any{"top_k": 1})
	var claimed struct{ Tasks []task }
	b.mustStatus(b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w", "max_tasks": 3}), 200).decode(t, &claimed)
	if len(claimed.Tasks) != 3 {
		t.Fatalf("batch claim got %d tasks, want 3", len(claimed.Tasks))
	}
	for i, tk := range claimed.Tasks {
		if tk.ChunkIndex != i {
			t.Fatalf("batch claim order: task %d has chunk %d", i, tk.ChunkIndex)
		}
	}
	var rest struct{ Tasks []task }
	b.mustStatus(b.worker("POST", "/tasks/claim", map[string]any{"worker_id": "w", "max_tasks": 10}), 200).decode(t, &rest)
	if len(rest.Tasks) != 2 {
		t.Fatalf("second batch got %d tasks, want the 2 left", len(rest.Tasks))
	}
	all := append(claimed.Tasks, rest.Tasks...)
	items := []map[string]any{}
	for _, tk := range all {
		items = append(items, map[string]any{"task_id": tk.TaskID, "worker_id": "w", "attempt": 1,
			"output": fmt.Sprintf("id,score\nrow%d,%d\n", tk.ChunkIndex, tk.ChunkIndex)})
	}
	// Items are judged one by one: a bad output, a foreign lease, an unknown task.
	items = append(items,
		map[string]any{"task_id": all[0].TaskID, "worker_id": "w", "attempt": 1, "output": "id,score\nx,1\n"},
		map[string]any{"task_id": all[1].TaskID, "worker_id": "intruder", "attempt": 1, "output": "id,score\nrow1,1\n"},
		map[string]any{"task_id": "s0:nope", "worker_id": "w", "attempt": 1, "output": "id,score\n"},
		map[string]any{"task_id": all[2].TaskID, "worker_id": "w", "attempt": 1, "output": "id,score\nx,NaN\n"},
	)
	var res struct {
		Results []struct {
			TaskID string `json:"task_id"`
			Status int    `json:"status"`
			Error  *struct{ Code string }
		}
	}
	b.mustStatus(b.worker("POST", "/tasks/results", map[string]any{"results": items}), 200).decode(t, &res)
	wantStatus := []int{200, 200, 200, 200, 200, 409, 409, 404, 400}
	wantCode := []string{"", "", "", "", "", "conflict", "lease_lost", "not_found", "invalid_argument"}
	for i, r := range res.Results {
		code := ""
		if r.Error != nil {
			code = r.Error.Code
		}
		if r.Status != wantStatus[i] || code != wantCode[i] {
			t.Errorf("item %d: %d %q, want %d %q", i, r.Status, code, wantStatus[i], wantCode[i])
		}
	}
	b.waitJob(j.JobID, "completed")
	r := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), 200)
	if string(r.body) != "id,score\nrow4,4\n" {
		t.Fatalf("result %q", r.body)
	}
}

func TestListJobsAndTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	var ids []string
	for i := range 5 {
		j := b.createJob(3, map[string]any{"name": fmt.Sprint("job", i)})
		ids = append(ids, j.JobID)
		b.clock.Advance(time.Millisecond)
	}
	b.mustStatus(b.client("POST", "/jobs/"+ids[1]+"/cancel", nil), 200)
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/jobs?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var out struct {
			Jobs       []job
			NextCursor *string `json:"next_cursor"`
		}
		b.mustStatus(b.client("GET", path, nil), 200).decode(t, &out)
		for _, j := range out.Jobs {
			seen = append(seen, j.JobID)
		}
		if out.NextCursor == nil {
			break
		}
		cursor = *out.NextCursor
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("paged jobs %v, want newest first %v", seen, want)
	}
	var cancelled struct{ Jobs []job }
	b.mustStatus(b.client("GET", "/jobs?status=cancelled", nil), 200).decode(t, &cancelled)
	if len(cancelled.Jobs) != 1 || cancelled.Jobs[0].JobID != ids[1] || cancelled.Jobs[0].Tasks.Cancelled != 3 {
		t.Fatalf("status=cancelled gave %+v", cancelled.Jobs)
	}

	// Tasks of a job: chunk tasks only, by index, filtered by state, paged.
	tk, _ := b.claim("w", nil) // job 0, chunk 0
	if tk.JobID != ids[0] {
		t.Fatalf("claimed from %s, want the oldest job %s", tk.JobID, ids[0])
	}
	var page struct {
		Tasks      []task
		NextCursor *string `json:"next_cursor"`
	}
	b.mustStatus(b.client("GET", "/jobs/"+ids[0]+"/tasks?limit=2", nil), 200).decode(t, &page)
	if len(page.Tasks) != 2 || page.Tasks[0].ChunkIndex != 0 || page.Tasks[1].ChunkIndex != 1 || page.NextCursor == nil {
		t.Fatalf("first task page %+v", page)
	}
	var page2 struct {
		Tasks      []task
		NextCursor *string `json:"next_cursor"`
	}
	b.mustStatus(b.client("GET", "/jobs/"+ids[0]+"/tasks?limit=2&cursor="+*page.NextCursor, nil), 200).decode(t, &page2)
	if len(page2.Tasks) != 1 || page2.Tasks[0].ChunkIndex != 2 || page2.NextCursor != nil {
		t.Fatalf("second task page %+v", page2)
	}
	var leased struct{ Tasks []task }
	b.mustStatus(b.client("GET", "/jobs/"+ids[0]+"/tasks?state=leased", nil), 200).decode(t, &leased)
	if len(leased.Tasks) != 1 || leased.Tasks[0].TaskID != tk.TaskID || *leased.Tasks[0].LeaseOwner != "w" {
		t.Fatalf("state=leased gave %+v", leased.Tasks)
	}
	got := b.getTask(tk.TaskID)
	if got.State != "leased" || got.Attempt != 1 || got.LeaseOwner == nil || got.ScoreColumn != "score" {
		t.Fatalf("GET /tasks/{id} = %+v", got)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	j := b.createJob(3, nil)
	tk, _ := b.claim("w", nil)
	var c job
	b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/cancel", nil), 200).decode(t, &c)
	if c.Status != "cancelled" || c.Tasks.Cancelled != 3 || c.FinishedAt == nil {
		t.Fatalf("cancelled job %+v", c)
	}
	// Idempotent.
	var again job
	b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/cancel", nil), 200).decode(t, &again)
	if again.Status != "cancelled" || !again.FinishedAt.Equal(*c.FinishedAt) {
		t.Fatalf("second cancel %+v", again)
	}
	// The worker holding a lease is told to stop, whatever it writes.
	for _, path := range []string{"/heartbeat", "/result", "/failure"} {
		body := map[string]any{"worker_id": "w", "attempt": 1}
		if path == "/result" {
			body["output"] = "id,score\n"
		}
		r := b.worker("POST", "/tasks/"+tk.TaskID+path, body)
		if r.status != http.StatusConflict || r.errCode() != "cancelled" {
			t.Errorf("%s after cancel = %s, want 409 cancelled", path, r)
		}
	}
	if _, ok := b.claim("w", nil); ok {
		t.Fatal("claimed a task of a cancelled job")
	}
	r := b.client("GET", "/jobs/"+j.JobID+"/result", nil)
	if r.status != http.StatusConflict || r.errCode() != "not_ready" {
		t.Fatalf("result of a cancelled job = %s, want 409 not_ready", r)
	}
}

func TestResultReplayAndConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	j := b.createJob(2, nil)
	tk, _ := b.claim("w", nil)
	out := "id,score\na,1\n"
	b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), http.StatusConflict)
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w", 1, out)), 200)
	before := b.client("GET", "/tasks/"+tk.TaskID, nil).body
	var replay task
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w", 1, out)), 200).decode(t, &replay)
	if replay.State != "completed" {
		t.Fatalf("replay answered %+v", replay)
	}
	if after := b.client("GET", "/tasks/"+tk.TaskID, nil).body; string(after) != string(before) {
		t.Fatalf("replay changed the task: %s → %s", before, after)
	}
	r := b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w", 1, "id,score\nb,2\n"))
	if r.status != http.StatusConflict || r.errCode() != "conflict" {
		t.Fatalf("different result = %s, want 409 conflict", r)
	}
	// A lease that is not yours.
	tk2, _ := b.claim("w2", nil)
	for _, c := range []struct {
		worker  string
		attempt int
	}{{"w", 1}, {"w2", 2}} {
		r := b.worker("POST", "/tasks/"+tk2.TaskID+"/heartbeat", map[string]any{"worker_id": c.worker, "attempt": c.attempt})
		if r.status != http.StatusConflict || r.errCode() != "lease_lost" {
			t.Errorf("heartbeat by %s attempt %d = %s, want 409 lease_lost", c.worker, c.attempt, r)
		}
	}
}

func TestRetryAndFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true, frozen: true}) // the backoff ends only when told
	j := b.createJob(3, map[string]any{"max_attempts": 2})
	tk, _ := b.claim("w", nil)
	var f task
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/failure", map[string]any{"worker_id": "w", "attempt": 1, "error": "exit status 3"}), 200).decode(t, &f)
	if f.State != "pending" || f.Error == nil || *f.Error != "exit status 3" {
		t.Fatalf("after a retryable failure: %+v", f)
	}
	// Backoff: the task is not claimable at once (0.5-1 s after attempt 1) …
	next, _ := b.claim("w", nil)
	if next.TaskID == tk.TaskID {
		t.Fatal("a failed task was claimable before its backoff passed")
	}
	// … but is once the backoff passed.
	b.clock.Advance(2 * time.Second)
	again, ok := b.claim("w", nil)
	if !ok || again.TaskID != tk.TaskID || again.Attempt != 2 {
		t.Fatalf("after the backoff claimed %+v, want %s attempt 2", again, tk.TaskID)
	}
	// The last attempt fails for good: the job fails, the rest is cancelled.
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/failure", map[string]any{"worker_id": "w", "attempt": 2, "error": "bad line 7"}), 200).decode(t, &f)
	if f.State != "failed" {
		t.Fatalf("after the last attempt the task is %s", f.State)
	}
	jj := b.getJob(j.JobID)
	if jj.Status != "failed" || jj.Error == nil || !strings.Contains(*jj.Error, tk.TaskID) || !strings.Contains(*jj.Error, "bad line 7") {
		t.Fatalf("job after a task failed for good: %+v (error must name the task)", jj)
	}
	if jj.Tasks.Failed != 1 || jj.Tasks.Cancelled != 2 {
		t.Fatalf("job counts %+v, want 1 failed and 2 cancelled", jj.Tasks)
	}
	r := b.worker("POST", "/tasks/"+next.TaskID+"/result", result("w", 1, "id,score\n"))
	if r.status != http.StatusConflict || r.errCode() != "cancelled" {
		t.Fatalf("result to a task of a failed job = %s, want 409 cancelled", r)
	}
	root := b.getTask(j.JobID + "-root")
	if root.State != "failed" {
		t.Fatalf("stitch root is %s, want failed (the path to the root fails)", root.State)
	}
}

func TestNonRetryableFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	j := b.createJob(2, nil)
	tk, _ := b.claim("w", nil)
	var f task
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/failure",
		map[string]any{"worker_id": "w", "attempt": 1, "error": "line 3: fingerprint is not hex", "retryable": false}), 200).decode(t, &f)
	if f.State != "failed" || b.getJob(j.JobID).Status != "failed" {
		t.Fatalf("non-retryable failure left task %s job %s", f.State, b.getJob(j.JobID).Status)
	}
}

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	j := b.createJob(1, map[string]any{"lease_seconds": 5, "max_attempts": 2})
	stale, _ := b.claim("slow", nil)
	b.clock.Advance(6 * time.Second) // the slow worker stops heartbeating
	// Even before the reaper runs, the expired lease is lost.
	r := b.worker("POST", "/tasks/"+stale.TaskID+"/heartbeat", map[string]any{"worker_id": "slow", "attempt": 1})
	if r.status != http.StatusConflict || r.errCode() != "lease_lost" {
		t.Fatalf("heartbeat after expiry = %s, want 409 lease_lost", r)
	}
	if n, err := b.engine.ExpireLeases(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
	}
	fresh, ok := b.claim("fast", nil)
	if !ok || fresh.TaskID != stale.TaskID || fresh.Attempt != 2 {
		t.Fatalf("after expiry claimed %+v, want the same task at attempt 2", fresh)
	}
	r = b.worker("POST", "/tasks/"+stale.TaskID+"/result", result("slow", 1, "id,score\nlate,1\n"))
	if r.status != http.StatusConflict || r.errCode() != "lease_lost" {
		t.Fatalf("late result of the stale worker = %s, want 409 lease_lost", r)
	}
	b.mustStatus(b.worker("POST", "/tasks/"+fresh.TaskID+"/result", result("fast", 2, "id,score\nfresh,1\n")), 200)
	// The last attempt's lease expiring fails the task and its job.
	j2 := b.createJob(1, map[string]any{"lease_seconds": 5, "max_attempts": 1})
	tk, _ := b.claim("w", nil)
	b.clock.Advance(6 * time.Second)
	if _, err := b.engine.ExpireLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.getTask(tk.TaskID); got.State != "failed" || got.Error == nil || !strings.Contains(*got.Error, "expired") {
		t.Fatalf("task whose last lease expired: %+v", got)
	}
	if got := b.getJob(j2.JobID); got.Status != "failed" {
		t.Fatalf("job whose last lease expired is %s", got.Status)
	}
	_ = j
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	body := jobBody(2, map[string]any{"name": "once"})
	var first, second job
	b.mustStatus(b.client("POST", "/jobs", body, "Idempotency-Key", "k1"), http.StatusCreated).decode(t, &first)
	b.mustStatus(b.client("POST", "/jobs", body, "Idempotency-Key", "k1"), http.StatusOK).decode(t, &second)
	if first.JobID != second.JobID {
		t.Fatalf("replay created %s, want the first job %s", second.JobID, first.JobID)
	}
	r := b.client("POST", "/jobs", jobBody(2, map[string]any{"name": "other"}), "Idempotency-Key", "k1")
	if r.status != http.StatusConflict || r.errCode() != "conflict" {
		t.Fatalf("same key, other body = %s, want 409 conflict", r)
	}
	var list struct{ Jobs []job }
	b.mustStatus(b.client("GET", "/jobs", nil), 200).decode(t, &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("%d jobs exist, want 1", len(list.Jobs))
	}
	// Concurrent first requests with one key still make one job.
	errs := make(chan response, 8)
	for range 8 {
		go func() { errs <- b.client("POST", "/jobs", body, "Idempotency-Key", "k2") }()
	}
	ids := map[string]bool{}
	for range 8 {
		r := <-errs
		if r.status != 200 && r.status != 201 {
			t.Fatalf("concurrent create = %s", r)
		}
		var j job
		r.decode(t, &j)
		ids[j.JobID] = true
	}
	if len(ids) != 1 {
		keys := make([]string, 0, len(ids))
		for k := range ids {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("concurrent creates with one key made jobs %v", keys)
	}
}

func TestReleaseOnShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	j := b.createJob(1, map[string]any{"max_attempts": 1})
	tk, _ := b.claim("w", nil)
	r := b.worker("POST", "/tasks/"+tk.TaskID+"/failure", map[string]any{"worker_id": "w", "attempt": 1, "error": "x", "release": true, "retryable": false})
	if r.status != 400 {
		t.Fatalf("release with retryable false: %s, want 400", r)
	}
	var f task
	b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/failure",
		map[string]any{"worker_id": "w", "attempt": 1, "error": "worker shutting down", "release": true}), 200).decode(t, &f)
	if f.State != "pending" || f.MaxAttempts != 2 {
		t.Fatalf("released task on its last attempt: %s with max_attempts %d, want pending with one more attempt", f.State, f.MaxAttempts)
	}
	again, ok := b.claim("w2", nil) // at once: no backoff
	if !ok || again.TaskID != tk.TaskID || again.Attempt != 2 {
		t.Fatalf("after a release claimed %+v, want the task at once at attempt 2", again)
	}
	if got := b.getJob(j.JobID); got.Status != "running" {
		t.Fatalf("a release changed the job to %s", got.Status)
	}
}
