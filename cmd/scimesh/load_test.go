package main

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
				s, err := slow.timed(client, "POST", a.url+"/jobs", "ctok", map[string]any{
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
				s, err := slow.timed(client, "POST", a.url+"/tasks/claim", "wtok", map[string]any{"worker_id": id, "max_tasks": 2, "wait_seconds": 1}, &claimed)
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
					s, err := slow.timed(client, "POST", b.url+"/tasks/results", "wtok", map[string]any{"results": items}, &res)
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
						s, err := slow.timed(client, "POST", b.url+"/tasks/"+it["task_id"].(string)+"/result", "wtok", one, nil)
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
