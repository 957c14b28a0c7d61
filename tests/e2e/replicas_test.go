package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
)

// TestTwoServersOnePostgres runs two coordinators on one PostgreSQL
// database — stateless replicas, each with its own reaper and stitcher —
// and 64 workers spread over both, then checks from the database that every
// task was leased once and completed once.
func TestTwoServersOnePostgres(t *testing.T) {
	t.Parallel()
	const workers, total = 64, 2000
	db := pgtest.URL(t)
	dir := t.TempDir()
	a := serveProc(t, dir, tokenEnv, "--db", db)
	b := serveProc(t, dir, tokenEnv, "--db", db, "--migrate") // --migrate on a migrated database is a no-op
	var j jobOut
	if s := call(t, "POST", a.URL+"/jobs", "ctok", map[string]any{"workload": "w", "top_k": 3, "input": map[string]any{"chunks": chunkList(total)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var (
		mu     sync.Mutex
		claims = map[string]int{}
		wg     sync.WaitGroup
	)
	for w := range workers {
		url := a.URL
		if w%2 == 1 {
			url = b.URL
		}
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			for {
				var claimed struct{ Tasks []taskOut }
				s, err := send("POST", url+"/tasks/claim", "wtok", map[string]any{"worker_id": id, "max_tasks": 4}, &claimed)
				if s == http.StatusNoContent {
					return
				}
				if s != 200 || err != nil {
					t.Errorf("claim: %d %v", s, err)
					return
				}
				items := []map[string]any{}
				mu.Lock()
				for _, tk := range claimed.Tasks {
					claims[tk.TaskID]++
					items = append(items, map[string]any{"task_id": tk.TaskID, "worker_id": id, "attempt": tk.Attempt,
						"output": fmt.Sprintf("id,score\nr%d,%d\n", tk.ChunkIndex, tk.ChunkIndex%1000)})
				}
				mu.Unlock()
				var res struct{ Results []struct{ Status int } }
				if s, err := send("POST", url+"/tasks/results", "wtok", map[string]any{"results": items}, &res); s != 200 || err != nil {
					t.Errorf("results: %d %v", s, err)
					return
				}
				for _, r := range res.Results {
					if r.Status != 200 {
						t.Errorf("result item: %d", r.Status)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(claims) != total {
		t.Fatalf("%d distinct tasks claimed, want %d", len(claims), total)
	}
	for id, n := range claims {
		if n != 1 {
			t.Fatalf("task %s leased %d times", id, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tasks, err := st.TaskList(ctx, &store.TaskListParams{JobID: j.JobID, Kind: domain.KindChunk, Limit: total + 1, AfterIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.State != domain.TaskCompleted || tk.Attempt != 1 {
			t.Fatalf("task %s: %s at attempt %d", tk.ID, tk.State, tk.Attempt)
		}
	}
	if len(tasks) != total {
		t.Fatalf("database holds %d chunk tasks, want %d", len(tasks), total)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got jobOut
		call(t, "GET", b.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		if got.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s, want completed", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Scores are index%1000: the best three are 999 from chunks 999 and 1999, then 998 from chunk 998.
	req, _ := http.NewRequest("GET", a.URL+"/jobs/"+j.JobID+"/result", nil)
	req.Header.Set("Authorization", "Bearer ctok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf [256]byte
	n, _ := resp.Body.Read(buf[:])
	if got, want := string(buf[:n]), "id,score\nr999,999\nr1999,999\nr998,998\n"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
}
