package httpapi_test

import (
	"net/http"
	"testing"
)

// TestRetryJob fails a job on one chunk and retries it: only the failed and
// cancelled chunks run again, with a fresh budget and attempt numbers that
// go on; the completed chunk keeps its output; the result is what a clean
// run gives; and a job that is not failed or cancelled is 409 conflict.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg})
			j := b.createJob(3, map[string]any{"top_k": 2, "max_attempts": 1})
			if r := b.client("POST", "/jobs/"+j.JobID+"/retry", nil); r.status != http.StatusConflict || r.errCode() != "conflict" {
				t.Fatalf("retry of a pending job = %s, want 409 conflict", r)
			}
			outputs := []string{"id,score\na,0.5\nb,0.9\n", "id,score\nc,0.9\nd,0.1\n", "id,score\ne,1\n"}
			first, ok := b.claim("w1", nil)
			if !ok || first.ChunkIndex != 0 {
				t.Fatalf("claim: %+v %v", first, ok)
			}
			b.mustStatus(b.worker("POST", "/tasks/"+first.TaskID+"/result", result("w1", 1, outputs[0])), 200)
			poisoned, ok := b.claim("w1", nil)
			if !ok || poisoned.ChunkIndex != 1 {
				t.Fatalf("claim: %+v %v", poisoned, ok)
			}
			if r := b.client("POST", "/jobs/"+j.JobID+"/retry", map[string]any{}); r.status != http.StatusConflict {
				t.Fatalf("retry of a running job = %s, want 409", r)
			}
			b.mustStatus(b.worker("POST", "/tasks/"+poisoned.TaskID+"/failure",
				map[string]any{"worker_id": "w1", "attempt": 1, "error": "bad line 3", "retryable": true}), 200)
			failed := b.waitJob(j.JobID, "failed")
			if failed.Tasks.Failed != 1 || failed.Tasks.Cancelled != 1 || failed.Tasks.Completed != 1 {
				t.Fatalf("failed job's tasks %+v", failed.Tasks)
			}

			if r := b.client("POST", "/jobs/"+j.JobID+"/retry", map[string]any{"force": true}); r.status != http.StatusBadRequest {
				t.Fatalf("retry with an unknown field = %s, want 400", r)
			}
			var again job
			b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/retry", nil), http.StatusOK).decode(t, &again)
			if again.Status != "pending" || again.Error != nil || again.FinishedAt != nil ||
				again.Tasks.Pending != 2 || again.Tasks.Completed != 1 || again.Tasks.Failed != 0 || again.Tasks.Cancelled != 0 {
				t.Fatalf("retried job %+v", again)
			}
			// A late write of the attempt that failed is refused: the
			// attempts go on.
			if r := b.worker("POST", "/tasks/"+poisoned.TaskID+"/result", result("w1", 1, outputs[1])); r.status != http.StatusConflict || r.errCode() != "lease_lost" {
				t.Fatalf("late result of the failed attempt = %s, want 409 lease_lost", r)
			}
			seen := map[int]task{}
			for range 2 {
				tk, ok := b.claim("w2", nil)
				if !ok {
					t.Fatal("fewer than two chunks to run again")
				}
				seen[tk.ChunkIndex] = tk
				b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w2", tk.Attempt, outputs[tk.ChunkIndex])), 200)
			}
			if tk, ok := seen[1]; !ok || tk.Attempt != 2 || tk.MaxAttempts != 2 {
				t.Errorf("chunk 1 ran again as %+v; want attempt 2 of 2 (a fresh budget of 1)", tk)
			}
			if tk, ok := seen[2]; !ok || tk.Attempt != 1 || tk.MaxAttempts != 1 {
				t.Errorf("chunk 2 (cancelled before it ran) ran as %+v; want attempt 1 of 1", tk)
			}
			if _, ok := seen[0]; ok {
				t.Error("the completed chunk 0 ran again")
			}
			if _, ok := b.claim("w2", nil); ok {
				t.Fatal("a third task was claimed after the retry")
			}
			done := b.waitJob(j.JobID, "completed")
			if done.Tasks.Completed != 3 || done.Progress != 1 {
				t.Fatalf("completed job %+v", done)
			}
			r := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), 200)
			if want := "id,score\ne,1\nb,0.9\n"; string(r.body) != want {
				t.Fatalf("result after retry %q, want %q", r.body, want)
			}
			if r := b.client("POST", "/jobs/"+j.JobID+"/retry", nil); r.status != http.StatusConflict || r.errCode() != "conflict" {
				t.Fatalf("retry of a completed job = %s, want 409 conflict", r)
			}
			if r := b.client("POST", "/jobs/s0:nope/retry", nil); r.status != http.StatusNotFound {
				t.Fatalf("retry of a missing job = %s, want 404", r)
			}
			if r := b.worker("POST", "/jobs/"+j.JobID+"/retry", nil); r.status != http.StatusForbidden {
				t.Fatalf("retry with the worker token = %s, want 403", r)
			}
		})
	}
}

// TestRetryCancelledJob retries a job cancelled before any chunk ran:
// every chunk runs, and the job completes.
func TestRetryCancelledJob(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	j := b.createJob(2, map[string]any{"top_k": 1})
	b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/cancel", nil), 200)
	var again job
	b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/retry", nil), 200).decode(t, &again)
	if again.Status != "pending" || again.Tasks.Pending != 2 {
		t.Fatalf("retried job %+v", again)
	}
	for range 2 {
		tk, ok := b.claim("w", nil)
		if !ok {
			t.Fatal("no chunk to run after the retry")
		}
		b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w", tk.Attempt, "id,score\nx,1\n")), 200)
	}
	b.waitJob(j.JobID, "completed")
}
