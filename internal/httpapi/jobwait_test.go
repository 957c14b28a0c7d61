package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// countingStore counts the engine's counts of jobs' tasks, the read that
// grows with a job's chunks.
type countingStore struct {
	store.Store
	counts *atomic.Int64
}

func (s countingStore) TaskCountByJob(ctx context.Context, jobIDs []string) (map[string]domain.TaskCounts, error) {
	s.counts.Add(1)
	return s.Store.TaskCountByJob(ctx, jobIDs)
}

// waited is the answer to a long-poll and how long it took.
type waited struct {
	job  job
	took time.Duration
	err  error
}

// waitGet long-polls job id in the background, for up to 30 s; unlike the
// bundle's helpers it may run outside the test's goroutine.
func (b *bundle) waitGet(id, after string) <-chan waited {
	out := make(chan waited, 1)
	req, err := http.NewRequest("GET", b.url+"/jobs/"+id+"?wait_seconds=30&after="+after, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.tokens.Client)
	go func() {
		start := time.Now()
		var w waited
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var body []byte
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
			}
			if err == nil {
				err = json.Unmarshal(body, &w.job)
			}
		}
		w.took, w.err = time.Since(start), err
		out <- w
	}()
	return out
}

func (w waited) must(t *testing.T) job {
	t.Helper()
	if w.err != nil {
		t.Fatalf("waiting GET: %v", w.err)
	}
	return w.job
}

// TestGetJobWait long-polls a job over a real listener. A token already
// stale answers at once, unless the state it marks is younger than
// engine.JobChangeDelay (a busy job: then it answers that long after the
// state began); a current token answers a chunk's completion no sooner
// than engine.JobChangeDelay after the call began, and the job's
// completion at once. While a call waits, the job's tasks are not counted:
// each answer counts them once. Bad wait_seconds and after are 400.
func TestGetJobWait(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			counts := new(atomic.Int64)
			b := setup(t, options{tokens: tokens, postgres: pg,
				wrap: func(s store.Store) store.Store { return countingStore{s, counts} }})
			j := b.createJob(4, nil)
			path := "/jobs/" + j.JobID
			for _, bad := range []struct{ query, says string }{
				{"wait_seconds=61", "wait_seconds"}, {"wait_seconds=abc", "wait_seconds"},
				{"wait_seconds=-1", "wait_seconds"}, {"wait_seconds=1.5", "wait_seconds"},
				{"wait_seconds=5&after=stale", "progress_token"}, {"wait_seconds=5&after=1.2", "progress_token"},
				{"wait_seconds=5&after=1.2.x", "progress_token"}, {"wait_seconds=5&after=-1.2.3", "progress_token"},
				{"after=1.2.3.4", "progress_token"},
			} {
				r := b.client("GET", path+"?"+bad.query, nil)
				if r.status != http.StatusBadRequest || r.errCode() != "invalid_argument" || !strings.Contains(string(r.body), bad.says) {
					t.Errorf("%s: %s, want 400 invalid_argument naming %s", bad.query, r, bad.says)
				}
			}

			// A stale token whose state is more than JobChangeDelay old
			// answers at once, with the job as it is.
			pending := b.getJob(j.JobID)
			time.Sleep(engine.JobChangeDelay + 100*time.Millisecond)
			var tks []task
			for range 4 {
				tk, ok := b.claim("w1", nil)
				if !ok {
					t.Fatal("no task to claim")
				}
				tks = append(tks, tk)
			}
			a := (<-b.waitGet(j.JobID, pending.ProgressToken)).must(t)
			if a.Status != "running" || a.Tasks.Leased != 4 || a.ProgressToken == pending.ProgressToken {
				t.Errorf("stale token answered %+v, want the job running with 4 leased and a new token", a)
			}
			if took := (<-b.waitGet(j.JobID, pending.ProgressToken)).took; took >= engine.JobChangeDelay {
				t.Errorf("a stale token waited %v", took)
			}

			// A current token waits, without counting, until a chunk
			// completes, and answers no sooner than JobChangeDelay after
			// the call began.
			before := counts.Load()
			got := b.waitGet(j.JobID, a.ProgressToken)
			time.Sleep(600 * time.Millisecond) // more than two rechecks
			if n := counts.Load() - before; n != 0 {
				t.Errorf("the tasks were counted %d times while the call waited", n)
			}
			b.mustStatus(b.worker("POST", "/tasks/"+tks[0].TaskID+"/result", result("w1", 1, "id,score\na,1\n")), 200)
			w := <-got
			one := w.must(t)
			if one.Tasks.Completed != 1 || one.ProgressToken == a.ProgressToken {
				t.Errorf("waiting GET returned %+v, want 1 completed and a new token", one)
			}
			if w.took < engine.JobChangeDelay || w.took >= 10*time.Second {
				t.Errorf("waiting GET answered a chunk's completion after %v, want between %v and 10s", w.took, engine.JobChangeDelay)
			}
			if n := counts.Load() - before; n != 1 {
				t.Errorf("the tasks were counted %d times for one answer, want 1", n)
			}
			if again := b.getJob(j.JobID); again.ProgressToken != one.ProgressToken {
				t.Errorf("with nothing changed the token went from %q to %q", one.ProgressToken, again.ProgressToken)
			}

			// A token stale but younger than JobChangeDelay (an answer
			// about a busy job, the job changed again since) is answered
			// JobChangeDelay after its state began, not at once.
			changed := time.Now()
			b.mustStatus(b.worker("POST", "/tasks/"+tks[1].TaskID+"/result", result("w1", 1, "id,score\nb,2\n")), 200)
			fresh := b.getJob(j.JobID)
			b.mustStatus(b.worker("POST", "/tasks/"+tks[2].TaskID+"/result", result("w1", 1, "id,score\nc,3\n")), 200)
			three := (<-b.waitGet(j.JobID, fresh.ProgressToken)).must(t)
			if since := time.Since(changed); since < engine.JobChangeDelay-5*time.Millisecond {
				t.Errorf("a token %v old, stale, was answered at once", since)
			}
			if three.Tasks.Completed != 3 {
				t.Errorf("answer to a stale token: %+v, want 3 completed", three)
			}

			// The job's completion is answered at once, whatever the time
			// since the call began.
			got = b.waitGet(j.JobID, three.ProgressToken)
			time.Sleep(200 * time.Millisecond) // let it wait, most likely
			b.mustStatus(b.worker("POST", "/tasks/"+tks[3].TaskID+"/result", result("w1", 1, "id,score\nd,4\n")), 200)
			sent := time.Now()
			w = <-got
			done := w.must(t)
			answered := time.Since(sent)
			if done.Status != "completed" || done.FinishedAt == nil {
				t.Fatalf("waiting GET returned %+v, want the job completed", done)
			}
			// Loose bounds for a busy machine: the point is that it did not
			// wait out its 30 s.
			if answered >= 2*time.Second {
				t.Errorf("the completed job was answered %v after its last result (%v after the call began)", answered, w.took)
			}
			t.Logf("completion answered %v after the last result, %v after the job finished", answered, time.Since(*done.FinishedAt))

			// A final job answers at once, whatever the token.
			if took := (<-b.waitGet(j.JobID, done.ProgressToken)).took; took >= 2*time.Second {
				t.Errorf("a final job waited %v", took)
			}
		})
	}
}
