package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/tests/framework"
	"github.com/scimesh/scimesh/tests/framework/binary"
	"github.com/scimesh/scimesh/tests/framework/inprocess"
)

// The tests of this file are the shared bodies: each runs once against
// the scimesh binary and once in process (tests/framework).

// forEachRunner runs body as parallel subtests, one per runner.
func forEachRunner(t *testing.T, body func(t *testing.T, r framework.Runner)) {
	t.Helper()
	for _, r := range []framework.Runner{binary.Runner{Path: scimesh}, inprocess.Runner{}} {
		t.Run(r.Name(), func(t *testing.T) {
			t.Parallel()
			body(t, r)
		})
	}
}

// within is t's context, ended after d: a job that never ends fails its
// test instead of hanging the run.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// submit submits a job and fails t if it is refused.
func submit(ctx context.Context, t *testing.T, c framework.Client, path string, spec framework.JobSpec) string {
	t.Helper()
	id, err := c.Submit(ctx, path, spec)
	if err != nil {
		t.Fatalf("submit %s: %v", filepath.Base(path), err)
	}
	return id
}

// awaitStatus waits for the job to end and fails t unless it ends with status.
func awaitStatus(ctx context.Context, t *testing.T, c framework.Client, id, status string) *client.Job {
	t.Helper()
	j, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait for job %s: %v", id, err)
	}
	if j.Status != status {
		t.Fatalf("job %s ended %s (%s), want %s", id, j.Status, j.Error, status)
	}
	return j
}

// checkResult fails t unless the job's final CSV is want.
func checkResult(ctx context.Context, t *testing.T, c framework.Client, id, want string) {
	t.Helper()
	got, err := c.Result(ctx, id)
	if err != nil {
		t.Fatalf("result of job %s: %v", id, err)
	}
	if string(got) != want {
		t.Fatalf("result of job %s:\n%s\nwant:\n%s", id, got, want)
	}
}

// writeFingerprints writes n rows id,fingerprint of random 64-bit
// fingerprints in hex, and returns a query fingerprint and the top k of
// the rows by their Tanimoto similarity to it, computed here as the
// contract defines it: desc, ties by row order, each score the shortest
// decimal that reads back as the same float64.
func writeFingerprints(t *testing.T, path string, n, k int) (query, want string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 5))
	q := rng.Uint64()
	type row struct {
		id    string
		score float64
	}
	rows := make([]row, n)
	var b strings.Builder
	b.WriteString("id,fingerprint\n")
	for i := range rows {
		fp := rng.Uint64() & rng.Uint64() // sparse, as real fingerprints are: scores spread out
		if i%97 == 0 {
			fp = q // a few exact matches
		}
		rows[i].id = fmt.Sprintf("m%04d", i)
		if union := bits.OnesCount64(fp | q); union > 0 {
			rows[i].score = float64(bits.OnesCount64(fp&q)) / float64(union)
		}
		fmt.Fprintf(&b, "%s,%016x\n", rows[i].id, fp)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	var out strings.Builder
	w := csv.NewWriter(&out)
	w.Write([]string{"id", "score"})
	for _, r := range rows[:k] {
		w.Write([]string{r.id, strconv.FormatFloat(r.score, 'g', -1, 64)})
	}
	w.Flush()
	return fmt.Sprintf("%016x", q), out.String()
}

// TestCommonJobResult runs two jobs through two workers, on each store: a
// command workload and the built-in tanimoto with a parameter; each final
// CSV must be byte for byte the top K computed here.
func TestCommonJobResult(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, r framework.Runner) {
		onEachStore(t, func(t *testing.T, pg bool) {
			ctx := within(t, 2*time.Minute)
			dir := t.TempDir()
			co := r.Serve(t, framework.ServeConfig{DB: newDB(t, dir, pg)})
			for range 2 {
				r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{copyWorkload(""), "tanimoto"}, Concurrency: 2})
			}
			c := co.Client()
			table, fps := filepath.Join(dir, "table.csv"), filepath.Join(dir, "fps.csv")
			wantCopy := writeScoredTable(t, table, 2000, 25)
			query, wantFPS := writeFingerprints(t, fps, 1500, 20)
			copyID := submit(ctx, t, c, table, framework.JobSpec{Workload: "copy", TopK: 25, ChunkRows: 150})
			fpsID := submit(ctx, t, c, fps, framework.JobSpec{Workload: "tanimoto", TopK: 20, ChunkRows: 200, Params: map[string]string{"query": query}})
			for _, j := range []struct {
				id     string
				chunks int
				want   string
			}{{copyID, 14, wantCopy}, {fpsID, 8, wantFPS}} {
				got := awaitStatus(ctx, t, c, j.id, client.JobCompleted)
				if got.Tasks.Total != j.chunks || got.Tasks.Completed != j.chunks || got.Progress != 1 {
					t.Errorf("job %s: tasks %+v, progress %v; want %d chunks, all completed", j.id, got.Tasks, got.Progress, j.chunks)
				}
				checkResult(ctx, t, c, j.id, j.want)
			}
		})
	})
}

// TestCommonCancel cancels a job while workers run its chunks: every chunk
// is cancelled, the job stays cancelled (a second cancel changes nothing)
// and has no result, and the worker stops the cancelled commands at its
// next heartbeat: its two slots run the next job, not after the minute
// they would sleep.
func TestCommonCancel(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, r framework.Runner) {
		ctx := within(t, time.Minute)
		dir := t.TempDir()
		co := r.Serve(t, framework.ServeConfig{})
		r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{copyWorkload("sleep 60; "), "quick=sed 1s/value/score/"}, Concurrency: 2})
		c := co.Client()
		table := filepath.Join(dir, "table.csv")
		writeScoredTable(t, table, 400, 5)
		// A lease of 6 s: the worker hears of the cancel within 2 s.
		id := submit(ctx, t, c, table, framework.JobSpec{Workload: "copy", TopK: 5, ChunkRows: 100, LeaseSeconds: 6})
		for {
			j, err := c.Status(ctx, id)
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if j.Status == client.JobRunning && j.Tasks.Leased > 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("job %s is %s with tasks %+v, want running with leased chunks", id, j.Status, j.Tasks)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := c.Cancel(ctx, id); err != nil {
			t.Fatalf("cancel a running job: %v", err)
		}
		j := awaitStatus(ctx, t, c, id, client.JobCancelled)
		if j.Tasks.Total != 4 || j.Tasks.Cancelled != 4 {
			t.Errorf("cancelled job's tasks %+v, want all 4 cancelled", j.Tasks)
		}
		if got, err := c.Result(ctx, id); err == nil || !strings.Contains(err.Error(), "409 not_ready") || !strings.Contains(err.Error(), "is cancelled") {
			t.Errorf("result of a cancelled job: %q, %v; want 409 not_ready saying it is cancelled", got, err)
		}
		if err := c.Cancel(ctx, id); err != nil {
			t.Errorf("cancel of a cancelled job: %v, want no error", err)
		}
		if j, err := c.Status(ctx, id); err != nil || j.Status != client.JobCancelled || j.Tasks.Cancelled != 4 {
			t.Errorf("after a second cancel: %+v, %v; want still cancelled", j, err)
		}
		next := submit(ctx, t, c, table, framework.JobSpec{Workload: "quick", TopK: 5, ChunkRows: 100})
		awaitStatus(within(t, 20*time.Second), t, c, next, client.JobCompleted)
	})
}

// TestCommonRetry fails a job on a poisoned chunk, fixes the workload and
// retries the job, which then completes with a clean run's result; a
// completed job cannot be retried.
func TestCommonRetry(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, r framework.Runner) {
		ctx := within(t, time.Minute)
		dir := t.TempDir()
		marker := filepath.Join(dir, "poison")
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		co := r.Serve(t, framework.ServeConfig{})
		r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{poisonWorkload(marker)}})
		c := co.Client()
		table := filepath.Join(dir, "table.csv")
		want := writeScoredTable(t, table, 1000, 25)
		id := submit(ctx, t, c, table, framework.JobSpec{Workload: "copy", TopK: 25, ChunkRows: 100, MaxAttempts: 1})
		if j := awaitStatus(ctx, t, c, id, client.JobFailed); !strings.Contains(j.Error, "poisoned chunk") && !strings.Contains(j.Error, id+"-1") {
			t.Errorf("failed job's error %q names neither the chunk nor its failure", j.Error)
		}
		if got, err := c.Result(ctx, id); err == nil || !strings.Contains(err.Error(), "409 not_ready") || !strings.Contains(err.Error(), "is failed") {
			t.Fatalf("result of a failed job: %q, %v; want 409 not_ready saying it is failed", got, err)
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		if err := c.Retry(ctx, id); err != nil {
			t.Fatalf("retry a failed job: %v", err)
		}
		awaitStatus(ctx, t, c, id, client.JobCompleted)
		checkResult(ctx, t, c, id, want)
		if err := c.Retry(ctx, id); err == nil || !strings.Contains(err.Error(), "409 conflict") {
			t.Errorf("retry of a completed job: %v, want 409 conflict", err)
		}
	})
}

// TestCommonBadJob: a job out of bounds is refused with an error that
// names the field, and nothing is created; an unknown job is not found.
func TestCommonBadJob(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, r framework.Runner) {
		ctx := within(t, time.Minute)
		dir := t.TempDir()
		c := r.Serve(t, framework.ServeConfig{}).Client()
		table := filepath.Join(dir, "table.csv")
		writeScoredTable(t, table, 10, 1)
		id, err := c.Submit(ctx, table, framework.JobSpec{Workload: "copy", TopK: 100001})
		if err == nil || !strings.Contains(err.Error(), "400 invalid_argument") || !strings.Contains(err.Error(), "top_k") {
			t.Errorf("submit with top_k 100001: job %q, %v; want 400 invalid_argument naming top_k", id, err)
		}
		if jobs, err := c.Jobs(ctx); err != nil || len(jobs) != 0 {
			t.Errorf("jobs after a refused submit: %+v, %v; want none", jobs, err)
		}
		if j, err := c.Status(ctx, "s0:missing"); err == nil || !strings.Contains(err.Error(), "404 not_found") {
			t.Errorf("status of a job that does not exist: %+v, %v; want 404 not_found", j, err)
		}
	})
}

// TestCommonRestart stops the coordinator (the binary with SIGKILL) and
// starts it again on the same SQLite database: a completed job keeps its
// result, and a job no worker had claimed is still there, whole, and runs
// to the same result.
func TestCommonRestart(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, r framework.Runner) {
		ctx := within(t, 2*time.Minute)
		dir := t.TempDir()
		co := r.Serve(t, framework.ServeConfig{})
		r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{copyWorkload("")}})
		c := co.Client()
		table := filepath.Join(dir, "table.csv")
		want := writeScoredTable(t, table, 1000, 25)
		done := submit(ctx, t, c, table, framework.JobSpec{Workload: "copy", TopK: 25, ChunkRows: 100})
		awaitStatus(ctx, t, c, done, client.JobCompleted)
		later := submit(ctx, t, c, table, framework.JobSpec{Workload: "later", TopK: 25, ChunkRows: 100})

		co.Restart(t)
		if j, err := c.Status(ctx, done); err != nil || j.Status != client.JobCompleted {
			t.Fatalf("completed job after the restart: %+v, %v", j, err)
		}
		checkResult(ctx, t, c, done, want)
		if j, err := c.Status(ctx, later); err != nil || j.Status != client.JobPending || j.Tasks.Total != 10 || j.Tasks.Pending != 10 {
			t.Fatalf("unclaimed job after the restart: %+v, %v; want pending with 10 pending chunks", j, err)
		}
		r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{"later=sed 1s/value/score/"}})
		awaitStatus(ctx, t, c, later, client.JobCompleted)
		checkResult(ctx, t, c, later, want)
		if jobs, err := c.Jobs(ctx); err != nil || len(jobs) != 2 {
			t.Errorf("jobs after the restart: %d, %v; want 2", len(jobs), err)
		}
	})
}
