package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/s3test"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/sqlite"
)

func TestMain(m *testing.M) {
	os.Exit(s3test.Run(s3test.RunFunc(func() int { return pgtest.Run(m) })))
}

func openStore(t testing.TB) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newEngine(s store.Store, cfg engine.Config) *engine.Engine {
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.StitchInterval == 0 {
		cfg.StitchInterval = 20 * time.Millisecond
	}
	return engine.New(s, cfg)
}

func spec(n int) *domain.JobSpec {
	chunks := make([]domain.ChunkRef, n)
	for i := range chunks {
		chunks[i] = domain.ChunkRef{URI: fmt.Sprintf("https://x.org/%d", i), SHA256: strings.Repeat("0", 64)}
	}
	return &domain.JobSpec{
		Workload: "w", Parameters: json.RawMessage("{}"), Chunks: chunks, ChunkRows: 10, HasHeader: true,
		TopK: 1, ScoreColumn: "score", Order: domain.Desc, MaxAttempts: 3, LeaseSeconds: 60,
	}
}

// TestRunStops checks that the background loops end with their context and
// leave no goroutine behind.
func TestRunStops(t *testing.T) {
	s := openStore(t) // closed after the check, by t.Cleanup
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEngine(s, engine.Config{ReapInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// TestTwoEnginesStitchOnce runs two coordinators' loops on one database:
// every job is stitched exactly once and completes.
func TestTwoEnginesStitchOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	a := newEngine(s, engine.Config{NodeID: "a"})
	b := newEngine(s, engine.Config{NodeID: "b"})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	wg.Go(func() { b.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	var ids []string
	for range 10 {
		v, _, err := a.CreateJob(t.Context(), spec(3), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	for {
		tasks, err := b.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Max: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			break
		}
		var items []engine.CompleteTaskParams
		for _, tk := range tasks {
			items = append(items, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt,
				Output: fmt.Appendf(nil, "id,score\n%s,%d\n", tk.ID, tk.ChunkIndex)})
		}
		for _, r := range a.CompleteTasks(t.Context(), items) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for {
			v, err := a.GetJob(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status == domain.JobCompleted {
				root, err := s.TaskGet(t.Context(), v.RootTaskID)
				if err != nil {
					t.Fatal(err)
				}
				if root.State != domain.TaskCompleted || root.Attempt != 1 {
					t.Fatalf("root of %s: %s at attempt %d, want completed at its first lease", id, root.State, root.Attempt)
				}
				if v.Result != nil {
					t.Errorf("GetJob of %s read the final CSV; only JobResult may", id)
				}
				want := fmt.Sprintf("id,score\n%s-2,2\n", id)
				if got := readResult(t, a, id); string(got) != want {
					t.Fatalf("result of %s = %q; want %q", id, got, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s is %s", id, v.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestFailureBackoff(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now, Jitter: func() float64 { return 0.5 }})
	v, _, err := e.CreateJob(t.Context(), spec(1), "")
	if err != nil {
		t.Fatal(err)
	}
	waits := []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond}
	for i, want := range waits {
		tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w"})
		if err != nil || len(tasks) != 1 || tasks[0].Attempt != i+1 {
			t.Fatalf("claim %d: %v %v", i, tasks, err)
		}
		got, err := e.FailTask(t.Context(), engine.FailTaskParams{TaskID: tasks[0].ID, WorkerID: "w", Attempt: i + 1, Error: "boom", Retryable: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != domain.TaskPending || !got.RunAfter.Equal(c.Now().Add(want)) {
			t.Fatalf("after attempt %d: %s, run after %v, want pending at +%v", i+1, got.State, got.RunAfter.Sub(c.Now()), want)
		}
		c.Advance(want)
	}
	tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim of the last attempt: %v, %v", tasks, err)
	}
	if _, err := e.FailTask(t.Context(), engine.FailTaskParams{TaskID: tasks[0].ID, WorkerID: "w", Attempt: 3, Error: "boom", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	job, err := e.GetJob(t.Context(), v.ID)
	if err != nil || job.Status != domain.JobFailed || !strings.Contains(job.Error, "after 3 attempt(s): boom") {
		t.Fatalf("job after the last attempt: %+v %v", job, err)
	}
	if _, err := e.RenewLease(t.Context(), tasks[0].ID, "w", 3); !errors.Is(err, domain.ErrCancelled) {
		t.Fatalf("heartbeat on a failed task = %v, want ErrCancelled", err)
	}
}

// TestReplicasWakeEachOther runs two engines on one PostgreSQL database,
// as two coordinators: a claim long-polling on one is woken at once by a job
// created on the other, although neither polls within the wait.
func TestReplicasWakeEachOther(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := newEngine(openPG(t, url), engine.Config{NodeID: "a", PollInterval: time.Hour})
	b := newEngine(openPG(t, url), engine.Config{NodeID: "b", PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	wg.Go(func() { b.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	got := make(chan []*engine.TaskView, 1)
	go func() {
		tasks, err := b.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Wait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- tasks
	}()
	// Listening starts asynchronously: a notification sent before it may be
	// lost, so create a job every second until the claim wakes. Without
	// LISTEN/NOTIFY it never does within the wait (PollInterval is an hour).
	for i := 0; ; i++ {
		if _, _, err := a.CreateJob(t.Context(), spec(1), ""); err != nil {
			t.Fatal(err)
		}
		select {
		case tasks := <-got:
			if len(tasks) != 1 {
				t.Fatalf("the woken claim got %d tasks, want 1", len(tasks))
			}
			return
		case <-time.After(time.Second):
		}
		if i == 10 {
			t.Fatal("a claim on one coordinator was not woken by jobs created on the other")
		}
	}
}

// TestTreeLeaseExpiry lets the last lease of a tree's leaf expire: the leaf
// fails for good, its path to the root fails, and the rest is cancelled.
func TestTreeLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Shard: "s0", Now: c.Now})
	ids, root, err := e.SubmitTree(t.Context(), &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:root", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:a"}, {Ref: "s0:b"}}},
		{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}, MaxAttempts: 1, LeaseSeconds: 5},
		{ID: "s0:b", Workload: "slow", Args: []domain.TreeArg{{Value: json.RawMessage("2")}}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := e.PollTree(t.Context(), "w", []string{"num"}, 0)
	if err != nil || leaf == nil || leaf.ID != ids["s0:a"] || string(leaf.Args[0]) != "1" {
		t.Fatalf("PollTree = %+v, %v", leaf, err)
	}
	c.Advance(6 * time.Second)
	if n, err := e.ExpireLeases(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v", n, err)
	}
	for id, want := range map[string]domain.TaskState{ids["s0:a"]: domain.TaskFailed, root: domain.TaskFailed, ids["s0:b"]: domain.TaskCancelled} {
		got, err := e.GetTask(t.Context(), id)
		if err != nil || got.State != want {
			t.Errorf("task %s: %v, %v; want %s", id, got.State, err, want)
		}
	}
	if err := e.CompleteTree(t.Context(), ids["s0:a"], "w", 1, json.RawMessage("1")); !errors.Is(err, domain.ErrCancelled) {
		t.Errorf("a late result of the expired leaf = %v, want ErrCancelled", err)
	}
}

// Group commit serves concurrent single-form calls together. The tests of
// it (the *TogetherAnswerAsAlone tests, beside the operation each groups)
// hold what a run of several calls answers against the same calls made one
// by one, on two engines set up alike, on both stores, with the helpers
// below.

// bothStores runs body on SQLite and on PostgreSQL, each test with fresh
// stores from open.
func bothStores(t *testing.T, body func(t *testing.T, open func() store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		body(t, func() store.Store { return openStore(t) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		body(t, func() store.Store { return openPG(t, pgtest.URL(t)) })
	})
}

// errClass names the sentinel an error carries, as the transports map it.
func errClass(err error) string {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"invalid_argument", domain.ErrInvalidArgument}, {"not_found", domain.ErrNotFound},
		{"lease_lost", domain.ErrLeaseLost}, {"cancelled", domain.ErrCancelled}, {"conflict", domain.ErrConflict},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "ok"
}

// leasedSetup is an engine with job a (5 chunks, all leased by "w",
// attempt 1) and job b (1 chunk, leased by "w", then cancelled).
type leasedSetup struct {
	e    *engine.Engine
	a, b string // job IDs
}

func newLeasedSetup(t *testing.T, s store.Store) *leasedSetup {
	t.Helper()
	ctx := t.Context()
	e := newEngine(s, engine.Config{})
	a, _, err := e.CreateJob(ctx, spec(5), "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := e.CreateJob(ctx, spec(1), "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 10})
	if err != nil || len(tasks) != 6 {
		t.Fatalf("claim = %d tasks, %v; want 6", len(tasks), err)
	}
	if _, err := e.CancelJob(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	return &leasedSetup{e: e, a: a.ID, b: b.ID}
}

func (s *leasedSetup) task(name string) string {
	switch name[0] {
	case 'a':
		return fmt.Sprintf("%s-%s", s.a, name[1:])
	case 'b':
		return fmt.Sprintf("%s-%s", s.b, name[1:])
	}
	return "s0:missing-0"
}

func (s *leasedSetup) states(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, n := range []string{"a0", "a1", "a2", "a3", "a4", "b0"} {
		v, err := s.e.GetTask(t.Context(), s.task(n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s attempt %d owner %s", n, v.State, v.Attempt, v.LeaseOwner))
	}
	return out
}

// onBothStores runs body on a SQLite file and on a PostgreSQL database.
func onBothStores(t *testing.T, body func(t *testing.T, s store.Store)) {
	bothStores(t, func(t *testing.T, open func() store.Store) { body(t, open()) })
}

func openPG(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
