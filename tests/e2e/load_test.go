package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", to read the database directly

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/testenv"
)

// slowest records the longest request of a test and which one it was.
type slowest struct {
	mu   sync.Mutex
	d    time.Duration
	what string
	n    int
}

// timed sends one request through client and records how long it took.
func (s *slowest) timed(client *http.Client, method, url, token string, body, out any) (int, error) {
	t0 := time.Now()
	status, err := sendWith(client, method, url, token, body, out)
	d := time.Since(t0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if d > s.d {
		s.d, s.what = d, method+" "+url
	}
	return status, err
}

// TestSmallPoolTwoReplicasUncachedJobs runs two coordinators on one
// PostgreSQL database with pools of 4 connections each, and 64 workers that
// claim on one and report on the other, over hundreds of jobs of one or two
// chunks: each result lands on a replica that has never seen its job, so
// every one needs the job's settings read from the database. An operation
// that held a connection while waiting for another would freeze a pool of 4
// under 64 concurrent results; here every task completes, and no request
// waits more than a few seconds.
func TestSmallPoolTwoReplicasUncachedJobs(t *testing.T) {
	t.Parallel()
	const (
		workers = 64
		jobs    = 768
		bound   = 20 * time.Second // far beyond a healthy request; a frozen pool never answers
	)
	db := pgtest.URL(t)
	dir := t.TempDir()
	a := serveProc(t, dir, tokenEnv, "--db", db, "--db-max-conns", "4")
	b := serveProc(t, dir, tokenEnv, "--db", db, "--db-max-conns", "4")
	client := &http.Client{Timeout: 2 * bound}
	var slow slowest

	// Created on A: B has none of them in its cache. One or two chunks each,
	// so that 64 workers claiming at once hold tasks of ~64 different jobs.
	total := 0
	var (
		createMu sync.Mutex
		created  []string
		cwg      sync.WaitGroup
	)
	for c := range 8 {
		cwg.Go(func() {
			for i := c; i < jobs; i += 8 {
				var j jobOut
				s, err := slow.timed(client, "POST", a.URL+"/jobs", "ctok", map[string]any{
					"workload": "w", "top_k": 2, "input": map[string]any{"chunks": chunkList(1 + i%2)}}, &j)
				if s != 201 || err != nil {
					t.Errorf("create job %d: %d %v", i, s, err)
					return
				}
				createMu.Lock()
				created = append(created, j.JobID)
				createMu.Unlock()
			}
		})
	}
	cwg.Wait()
	if t.Failed() {
		return
	}
	for i := range jobs {
		total += 1 + i%2
	}

	var (
		mu    sync.Mutex
		done  = map[string]int{}
		empty int // claims answered 204 while tasks were left
		wg    sync.WaitGroup
		start = time.Now()
	)
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			batch := w%2 == 1 // half report through POST /tasks/results, half one by one
			for {
				var claimed struct{ Tasks []taskOut }
				s, err := slow.timed(client, "POST", a.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": id, "max_tasks": 2}, &claimed)
				if s == http.StatusNoContent {
					mu.Lock()
					finished := len(done) == total
					if !finished {
						empty++
					}
					mu.Unlock()
					if finished || time.Since(start) > time.Minute {
						return
					}
					time.Sleep(20 * time.Millisecond) // others' tasks in flight; no long poll, so each request's time is its own
					continue
				}
				if s != 200 || err != nil {
					t.Errorf("claim on A: %d %v", s, err)
					return
				}
				items := []map[string]any{}
				for _, tk := range claimed.Tasks {
					items = append(items, map[string]any{"task_id": tk.TaskID, "worker_id": id, "attempt": tk.Attempt,
						"output": fmt.Sprintf("id,score\nr%d,%d\n", tk.ChunkIndex, tk.ChunkIndex)})
				}
				if batch {
					var res struct{ Results []struct{ Status int } }
					s, err := slow.timed(client, "POST", b.URL+"/tasks/results", "wtok", map[string]any{"results": items}, &res)
					if s != 200 || err != nil || len(res.Results) != len(items) {
						t.Errorf("results on B: %d %v (%d answers to %d)", s, err, len(res.Results), len(items))
						return
					}
					for _, r := range res.Results {
						if r.Status != 200 {
							t.Errorf("result item on B: %d", r.Status)
						}
					}
				} else {
					for _, it := range items {
						one := map[string]any{"worker_id": it["worker_id"], "attempt": it["attempt"], "output": it["output"]}
						s, err := slow.timed(client, "POST", b.URL+"/tasks/"+it["task_id"].(string)+"/result", "wtok", one, nil)
						if s != 200 || err != nil {
							t.Errorf("result on B: %d %v", s, err)
							return
						}
					}
				}
				mu.Lock()
				for _, it := range items {
					done[it["task_id"].(string)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d tasks of %d jobs through %d workers in %v; %d requests, the longest %v (%s); %d empty claims while tasks were left",
		total, jobs, workers, time.Since(start).Round(time.Millisecond), slow.n, slow.d.Round(time.Millisecond), slow.what, empty)
	if t.Failed() {
		return
	}
	if len(done) != total {
		t.Fatalf("%d distinct tasks reported, want %d", len(done), total)
	}
	if slow.d > bound {
		t.Errorf("the longest request took %v (%s), want under %v", slow.d, slow.what, bound)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	completed := 0
	for _, id := range created {
		tasks, err := st.TaskList(ctx, &store.TaskListParams{JobID: id, Kind: domain.KindChunk, Limit: 10, AfterIndex: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.State != domain.TaskCompleted || tk.Attempt != 1 {
				t.Fatalf("task %s: %s at attempt %d, want completed at attempt 1", tk.ID, tk.State, tk.Attempt)
			}
			completed++
		}
	}
	if completed != total {
		t.Fatalf("database holds %d completed chunk tasks, want %d", completed, total)
	}
	// Both replicas stitch: every job ends completed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		js, err := st.JobList(ctx, &store.JobListParams{Status: domain.JobCompleted, Limit: jobs + 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after 30 s", len(js), jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openDB opens the database at url (from newDB) for the test to read it
// directly, and returns a placeholder maker for its dialect.
func openDB(t *testing.T, url string, pg bool) (*sql.DB, func(n int) string) {
	t.Helper()
	var db *sql.DB
	var err error
	if pg {
		db, err = sql.Open("pgx", url)
	} else {
		db, err = sql.Open("sqlite", strings.TrimPrefix(url, "sqlite:")+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if pg {
		return db, func(n int) string { return fmt.Sprintf("$%d", n) }
	}
	return db, func(int) string { return "?" }
}

// createdTasks counts, straight from the database, the tasks of a job
// still being created (hidden) and those of visible jobs.
func createdTasks(ctx context.Context, db *sql.DB) (hiddenJob string, hidden, visible int, err error) {
	rows, err := db.QueryContext(ctx, `SELECT j.id, j.creating, count(t.id) FROM jobs j LEFT JOIN tasks t ON t.job_id = j.id GROUP BY j.id, j.creating`)
	if err != nil {
		return "", 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var creating bool
		var n int
		if err := rows.Scan(&id, &creating, &n); err != nil {
			return "", 0, 0, err
		}
		if creating {
			hiddenJob, hidden = id, n
		} else {
			visible += n
		}
	}
	return hiddenJob, hidden, visible, rows.Err()
}

// TestKilledMidCreation SIGKILLs a coordinator in the middle of a POST
// /jobs of 15,000 hosted chunks (3 batches of CreateBatch), once its first
// batch is in the database, on each store. After a restart the partial job
// is never visible to clients, the reaper deletes it and its tasks once its
// creation is stale, and the same request with the same Idempotency-Key
// then creates the whole job.
func TestKilledMidCreation(t *testing.T) {
	t.Parallel()
	onEachStore(t, killedMidCreation)
}

func killedMidCreation(t *testing.T, pg bool) {
	const chunks = 15000
	if chunks <= 2*engine.CreateBatch {
		t.Fatalf("%d chunks do not make several batches of %d", chunks, engine.CreateBatch)
	}
	dir := t.TempDir()
	url := newDB(t, dir, pg)
	addr := testenv.FreeAddr(t)
	p := serveOn(t, dir, addr, tokenEnv, "--db", url, "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, ph := openDB(t, url, pg)

	body, err := json.Marshal(map[string]any{"workload": "w", "top_k": 1, "input": map[string]any{"chunks": chunkList(chunks)}})
	if err != nil {
		t.Fatal(err)
	}
	post := func(url string) (int, jobOut, error) {
		req, _ := http.NewRequest("POST", url+"/jobs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer ctok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "big-job-1")
		var j jobOut
		// Generous: 60,001 tasks with the race detector on a busy machine
		// take well over the minute they take alone; a hang still ends.
		resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
		if err != nil {
			return 0, j, err
		}
		defer resp.Body.Close()
		err = json.NewDecoder(resp.Body).Decode(&j)
		return resp.StatusCode, j, err
	}
	answered := make(chan int, 1)
	go func() {
		s, _, _ := post(p.URL) // the kill cuts it short
		answered <- s
	}()

	// Kill once the first batch is written (the stitch root and at least
	// one batch of chunks), well before the last.
	var hiddenJob string
	var hidden int
	for deadline := time.Now().Add(time.Minute); ; {
		id, n, visible, err := createdTasks(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		if visible > 0 {
			t.Fatalf("the job became visible (%d tasks) before the kill: too few chunks to catch it in the middle", visible)
		}
		if n > engine.CreateBatch {
			if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.Wait()
			hiddenJob = id
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch of the job written after a minute")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if s := <-answered; s == http.StatusCreated || s == http.StatusOK {
		t.Fatalf("POST /jobs answered %d though its coordinator was killed in the middle", s)
	}
	if _, n, _, err := createdTasks(ctx, conn); err != nil {
		t.Fatal(err)
	} else {
		hidden = n
	}
	if hidden <= engine.CreateBatch || hidden >= chunks+1 {
		t.Fatalf("after the kill the hidden job %s has %d tasks, want a part of %d", hiddenJob, hidden, chunks+1)
	}
	t.Logf("killed with %d of %d tasks of job %s written", hidden, chunks+1, hiddenJob)

	p = serveOn(t, dir, addr, tokenEnv, "--db", url, "--log-level", "warn")
	invisible := func() {
		t.Helper()
		var list struct {
			Jobs []jobOut `json:"jobs"`
		}
		if s := call(t, "GET", p.URL+"/jobs?limit=100", "ctok", nil, &list); s != 200 || len(list.Jobs) != 0 {
			t.Fatalf("GET /jobs: %d with %d jobs, want 200 with none", s, len(list.Jobs))
		}
		if s := call(t, "GET", p.URL+"/jobs/"+hiddenJob, "ctok", nil, nil); s != http.StatusNotFound {
			t.Fatalf("GET /jobs/%s of the partial job: %d, want 404", hiddenJob, s)
		}
	}
	// The reaper gives up on it after CreationStale without progress, and
	// sweeps every CreationStale/2.
	start := time.Now()
	for deadline := start.Add(3 * engine.CreationStale); ; {
		invisible()
		var jobs, tasks int
		if err := conn.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs WHERE id = `+ph(1)+`), (SELECT count(*) FROM tasks WHERE job_id = `+ph(2)+`)`, hiddenJob, hiddenJob).Scan(&jobs, &tasks); err != nil {
			t.Fatal(err)
		}
		if jobs == 0 && tasks == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned job is still there after %v: %d job rows, %d tasks", 3*engine.CreationStale, jobs, tasks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the abandoned creation was swept %v after the restart", time.Since(start).Round(100*time.Millisecond))

	s, j, err := post(p.URL)
	if err != nil || s != http.StatusCreated {
		t.Fatalf("the same request again: %d %v, want 201", s, err)
	}
	var creating bool
	var tasks int
	if err := conn.QueryRowContext(ctx, `SELECT creating, (SELECT count(*) FROM tasks WHERE job_id = `+ph(1)+`) FROM jobs WHERE id = `+ph(2), j.JobID, j.JobID).Scan(&creating, &tasks); err != nil {
		t.Fatal(err)
	}
	if creating || tasks != chunks+1 {
		t.Fatalf("job %s: creating %v with %d tasks, want visible with %d", j.JobID, creating, tasks, chunks+1)
	}
	var got struct {
		Status string         `json:"status"`
		Tasks  map[string]int `json:"tasks"`
	}
	if s := call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &got); s != 200 || got.Tasks["pending"] != chunks {
		t.Fatalf("GET /jobs/%s: %d, status %s, tasks %v; want 200 with %d pending", j.JobID, s, got.Status, got.Tasks, chunks)
	}
	// A replay answers with that job, not another.
	if s, again, err := post(p.URL); err != nil || s != http.StatusOK || again.JobID != j.JobID {
		t.Fatalf("replay: %d %v job %s, want 200 with job %s", s, err, again.JobID, j.JobID)
	}
}
