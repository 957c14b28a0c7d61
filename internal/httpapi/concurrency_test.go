package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// TestConcurrentClaimers runs 64 workers over 2,000 tasks and checks, from
// the database afterwards, that every task completed exactly once and that
// no lease was ever handed out twice.
func TestConcurrentClaimers(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(storeName(pg), func(t *testing.T) {
			t.Parallel()
			const workers, total = 64, 2000
			b := setup(t, options{tokens: tokens, postgres: pg})
			j := b.createJob(total, map[string]any{"top_k": 1})
			var (
				mu      sync.Mutex
				claims  = map[string]int{}
				results atomic.Int64
				wg      sync.WaitGroup
			)
			for w := range workers {
				wg.Go(func() {
					id := fmt.Sprintf("w%d", w)
					for {
						r := b.worker("POST", "/tasks/claim", map[string]any{"worker_id": id})
						if r.status == http.StatusNoContent {
							return
						}
						if r.status != http.StatusOK {
							t.Errorf("claim: %s", r)
							return
						}
						var tk task
						r.decode(t, &tk)
						mu.Lock()
						claims[tk.TaskID]++
						mu.Unlock()
						out := fmt.Sprintf("id,score\nrow%d,%d\n", tk.ChunkIndex, tk.ChunkIndex)
						if r := b.worker("POST", "/tasks/"+tk.TaskID+"/result", result(id, tk.Attempt, out)); r.status != http.StatusOK {
							t.Errorf("result: %s", r)
							return
						}
						results.Add(1)
					}
				})
			}
			wg.Wait()
			if len(claims) != total || results.Load() != total {
				t.Fatalf("%d distinct tasks claimed and %d results, want %d each", len(claims), results.Load(), total)
			}
			for id, n := range claims {
				if n != 1 {
					t.Fatalf("task %s was leased %d times", id, n)
				}
			}
			// From the database: every chunk completed at its first attempt.
			tasks, err := b.store.TaskList(t.Context(), &store.TaskListParams{
				JobID: j.JobID, Kind: domain.KindChunk, Limit: total + 1, AfterIndex: -1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) != total {
				t.Fatalf("database holds %d chunk tasks, want %d", len(tasks), total)
			}
			for _, tk := range tasks {
				if tk.State != domain.TaskCompleted || tk.Attempt != 1 || claims[tk.ID] != 1 {
					t.Fatalf("task %s: state %s attempt %d claimed %d times", tk.ID, tk.State, tk.Attempt, claims[tk.ID])
				}
			}
			b.waitJob(j.JobID, "completed")
			r := b.mustStatus(b.client("GET", "/jobs/"+j.JobID+"/result", nil), 200)
			if want := fmt.Sprintf("id,score\nrow%d,%d\n", total-1, total-1); string(r.body) != want {
				t.Fatalf("result %q, want %q", r.body, want)
			}
		})
	}
}
