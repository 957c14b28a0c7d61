package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestGetJobWait long-polls a job: a wait with the job's current progress
// token returns once a task completes, showing the new count; a final job
// and a token already stale return at once; bad wait_seconds are 400.
func TestGetJobWait(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{tokens: tokens, postgres: pg})
			j := b.createJob(2, nil)
			for _, ws := range []string{"61", "abc", "-1", "1.5"} {
				r := b.client("GET", "/jobs/"+j.JobID+"?wait_seconds="+ws, nil)
				if r.status != http.StatusBadRequest || r.errCode() != "invalid_argument" {
					t.Errorf("wait_seconds=%s: %s, want 400 invalid_argument", ws, r)
				}
			}
			tk, ok := b.claim("w1", nil)
			if !ok {
				t.Fatal("no task to claim")
			}
			before := b.getJob(j.JobID)
			if before.ProgressToken == "" || before.Tasks.Completed != 0 {
				t.Fatalf("job before the result: %+v", before)
			}
			// A stale token answers at once.
			start := time.Now()
			stale := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"?wait_seconds=30&after=stale", nil), 200)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("a stale token waited %v", d)
			}
			var sj job
			stale.decode(t, &sj)
			if sj.ProgressToken != before.ProgressToken {
				t.Errorf("stale answer token %q, want %q", sj.ProgressToken, before.ProgressToken)
			}

			type answer struct {
				r    response
				took time.Duration
			}
			got := make(chan answer, 1)
			go func() {
				start := time.Now()
				r := b.client("GET", "/jobs/"+j.JobID+"?wait_seconds=30&after="+before.ProgressToken, nil)
				got <- answer{r, time.Since(start)}
			}()
			time.Sleep(300 * time.Millisecond) // let it wait, most likely
			b.mustStatus(b.worker("POST", "/tasks/"+tk.TaskID+"/result", result("w1", 1, "id,score\na,1\n")), 200)
			a := <-got
			if a.r.status != http.StatusOK {
				t.Fatalf("waiting GET: %s", a.r)
			}
			var after job
			a.r.decode(t, &after)
			if after.Tasks.Completed != 1 || after.ProgressToken == before.ProgressToken {
				t.Errorf("waiting GET returned %+v, want 1 completed and a new token", after)
			}
			if a.took >= 25*time.Second {
				t.Errorf("waiting GET took %v: it ran out its wait instead of seeing the completion", a.took)
			}

			// A final job answers at once, whatever the token.
			b.mustStatus(b.client("POST", "/jobs/"+j.JobID+"/cancel", map[string]any{}), 200)
			final := b.getJob(j.JobID)
			start = time.Now()
			r := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"?wait_seconds=30&after="+final.ProgressToken, nil), 200)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("a final job waited %v", d)
			}
			var fj struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(r.body, &fj); err != nil || fj.Status != "cancelled" {
				t.Errorf("final job: %s", r)
			}
		})
	}
}
