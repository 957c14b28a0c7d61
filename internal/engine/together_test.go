package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
)

// Group commit serves concurrent single-form calls together. These tests
// hold what a run of several calls answers against the same calls made
// one by one, on two engines set up alike, on both stores.

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

func TestResultsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	type item struct {
		task, worker string
		attempt      int
		output       string
	}
	good, other, bad := "id,score\nx,1\n", "id,score\ny,2\n", "id,value\nx,1\n"
	items := []item{
		{"a0", "w", 1, good},  // recorded
		{"a0", "w", 1, good},  // a replay of the one before: 200, nothing changes
		{"a0", "w", 1, other}, // a different result for a completed task: conflict
		{"a1", "w", 2, good},  // a stale attempt
		{"a2", "v", 1, good},  // another's lease
		{"a3", "w", 1, bad},   // a bad output in the middle: 400, the lease stays
		{"a4", "w", 1, good},
		{"b0", "w", 1, good}, // a task of a cancelled job
		{"zz", "w", 1, good}, // no such task
		{"a3", "w", 1, good}, // the lease the bad output left
	}
	want := []string{"ok", "ok", "conflict", "lease_lost", "lease_lost", "invalid_argument", "ok", "cancelled", "not_found", "ok"}
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		alone, together := newLeasedSetup(t, open()), newLeasedSetup(t, open())
		params := func(s *leasedSetup) []engine.CompleteTaskParams {
			var ps []engine.CompleteTaskParams
			for _, it := range items {
				ps = append(ps, engine.CompleteTaskParams{TaskID: s.task(it.task), WorkerID: it.worker, Attempt: it.attempt, Output: []byte(it.output)})
			}
			return ps
		}
		var got []string
		for _, p := range params(alone) {
			v, err := alone.e.CompleteTask(ctx, p)
			c := errClass(err)
			if err == nil {
				c += " " + string(v.State)
			}
			got = append(got, c)
		}
		var gotTogether []string
		results, txErr := together.e.CompleteTogether(ctx, params(together))
		if txErr != nil {
			t.Fatalf("the shared transaction failed as a whole: %v", txErr)
		}
		for _, r := range results {
			c := errClass(r.Err)
			if r.Err == nil {
				c += " " + string(r.Task.State)
			}
			gotTogether = append(gotTogether, c)
		}
		for i := range items {
			if w := want[i]; got[i] != w && got[i] != w+" completed" {
				t.Errorf("item %d alone: %s, want %s", i, got[i], w)
			}
			if gotTogether[i] != got[i] {
				t.Errorf("item %d %+v: together %q, alone %q", i, items[i], gotTogether[i], got[i])
			}
		}
		if a, b := alone.states(t), together.states(t); !slices.Equal(a, b) {
			t.Errorf("tasks after the results:\nalone    %q\ntogether %q", a, b)
		}
	})
}

func TestHeartbeatsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	type call struct {
		task, worker string
		attempt      int
	}
	calls := []call{{"a0", "w", 1}, {"a0", "w", 1}, {"a1", "w", 2}, {"a2", "v", 1}, {"b0", "w", 1}, {"zz", "w", 1}, {"a3", "w", 1}}
	want := []string{"ok", "ok", "lease_lost", "lease_lost", "cancelled", "not_found", "ok"}
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		alone, together := newLeasedSetup(t, open()), newLeasedSetup(t, open())
		var got []string
		for _, c := range calls {
			_, err := alone.e.RenewLease(ctx, alone.task(c.task), c.worker, c.attempt)
			got = append(got, errClass(err))
		}
		var ids, workers []string
		var attempts []int
		for _, c := range calls {
			ids, workers, attempts = append(ids, together.task(c.task)), append(workers, c.worker), append(attempts, c.attempt)
		}
		expires, errs, txErr := together.e.RenewTogether(ctx, ids, workers, attempts)
		if txErr != nil {
			t.Fatalf("the shared transaction failed as a whole: %v", txErr)
		}
		for i := range calls {
			if got[i] != want[i] {
				t.Errorf("heartbeat %d alone: %s, want %s", i, got[i], want[i])
			}
			if c := errClass(errs[i]); c != got[i] {
				t.Errorf("heartbeat %d %+v: together %s, alone %s", i, calls[i], c, got[i])
			}
			if errs[i] == nil && expires[i].IsZero() {
				t.Errorf("heartbeat %d together: no expiry", i)
			}
		}
		v, err := together.e.GetTask(ctx, together.task("a0"))
		if err != nil || !v.LeaseExpiresAt.Equal(expires[1]) {
			t.Errorf("a0's stored lease = %v, %v; want the last renewal's %v", v.LeaseExpiresAt, err, expires[1])
		}
		if a, b := alone.states(t), together.states(t); !slices.Equal(a, b) {
			t.Errorf("tasks after the heartbeats:\nalone    %q\ntogether %q", a, b)
		}
	})
}

func TestClaimsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	workers := []string{"a", "b", "a", "c"} // three tasks for four callers
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		assign := func(tasks []*domain.Task) []string {
			var out []string
			for i, tk := range tasks {
				if tk == nil {
					out = append(out, workers[i]+": none")
					continue
				}
				out = append(out, fmt.Sprintf("%s: chunk %d leased to %s, attempt %d", workers[i], tk.ChunkIndex, tk.LeaseOwner, tk.Attempt))
			}
			return out
		}
		var alone []*domain.Task
		e := newEngine(open(), engine.Config{})
		if _, _, err := e.CreateJob(ctx, spec(3), ""); err != nil {
			t.Fatal(err)
		}
		for _, w := range workers {
			got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: w})
			if err != nil {
				t.Fatal(err)
			}
			var tk *domain.Task
			if len(got) == 1 {
				tk = got[0].Task
			}
			alone = append(alone, tk)
		}
		e = newEngine(open(), engine.Config{})
		j, _, err := e.CreateJob(ctx, spec(3), "")
		if err != nil {
			t.Fatal(err)
		}
		together, errs := e.ClaimTogether(ctx, workers)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("claim %d together: %v", i, err)
			}
		}
		if a, b := assign(alone), assign(together); !slices.Equal(a, b) {
			t.Errorf("claims:\nalone    %q\ntogether %q", a, b)
		}
		if v, err := e.GetJob(ctx, j.ID); err != nil || v.Status != domain.JobRunning {
			t.Errorf("job after the claims together: %v, %v; want running", v, err)
		}
	})
}

// slowClaims is a store whose claims take a while, so that concurrent
// claims queue behind the ones in flight.
type slowClaims struct {
	store.Store
	calls, tasks atomic.Int64
}

func (s *slowClaims) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	time.Sleep(5 * time.Millisecond)
	s.calls.Add(1)
	got, err := s.Store.TaskClaim(ctx, p)
	s.tasks.Add(int64(len(got)))
	return got, err
}

// TestConcurrentClaimsShareStatements has 32 workers claim (one task, or
// two or three at once) and complete 400 tasks: every task is completed
// exactly once, by the worker it was leased to, no claim gets more than it
// asked for, and the claims took fewer statements than calls.
func TestConcurrentClaimsShareStatements(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		s := &slowClaims{Store: open()}
		e := newEngine(s, engine.Config{})
		j, _, err := e.CreateJob(ctx, spec(400), "")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		done := map[string]string{}
		var claimCalls atomic.Int64
		var wg sync.WaitGroup
		for w := range 32 {
			worker := fmt.Sprintf("w%d", w)
			max := 1 + w%3
			wg.Go(func() {
				for {
					claimCalls.Add(1)
					tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: worker, Max: max})
					if err != nil {
						t.Error(err)
						return
					}
					if len(tasks) == 0 {
						return
					}
					if len(tasks) > max {
						t.Errorf("%s asked for %d tasks and got %d", worker, max, len(tasks))
					}
					for _, tk := range tasks {
						if tk.LeaseOwner != worker {
							t.Errorf("%s got task %s leased to %s", worker, tk.ID, tk.LeaseOwner)
						}
						if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: worker, Attempt: tk.Attempt, Output: []byte("id,score\nx,1\n")}); err != nil {
							t.Errorf("%s: result of %s: %v", worker, tk.ID, err)
						}
						mu.Lock()
						if prev, ok := done[tk.ID]; ok {
							t.Errorf("task %s handed to %s and %s", tk.ID, prev, worker)
						}
						done[tk.ID] = worker
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(done) != 400 {
			t.Fatalf("%d tasks done, want 400", len(done))
		}
		calls, tasks := s.calls.Load(), s.tasks.Load()
		t.Logf("%d tasks in %d claim statements for %d claims", tasks, calls, claimCalls.Load())
		if tasks != 400 || calls >= claimCalls.Load() {
			t.Errorf("%d claim statements leased %d tasks to %d claims; want 400 tasks in fewer statements than claims", calls, tasks, claimCalls.Load())
		}
		v, err := e.GetJob(ctx, j.ID)
		if err != nil || v.Tasks.Completed != 400 {
			t.Errorf("job: %+v, %v; want 400 completed", v, err)
		}
	})
}

func TestTreeResultsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	type item struct {
		task, worker string
		attempt      int
		result       string
	}
	items := []item{
		{"s0:a", "w", 1, "1"},    // recorded, handed to the root
		{"s0:a", "w", 1, "1"},    // a replay
		{"s0:a", "w", 1, "7"},    // another result for a completed task
		{"s0:b", "w", 2, "2"},    // a stale attempt
		{"s0:b", "v", 1, "2"},    // another's lease
		{"s0:x", "w", 1, "2"},    // no such task
		{"s0:b", "w", 1, "2"},    // recorded: the root becomes runnable
		{"s0:root", "w", 1, "3"}, // not leased yet
	}
	want := []string{"ok", "ok", "conflict", "lease_lost", "lease_lost", "not_found", "ok", "lease_lost"}
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		setup := func() (*engine.Engine, map[string]string) {
			e := newEngine(open(), engine.Config{Shard: "s0"})
			ids, _, err := e.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
				{ID: "s0:root", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:a"}, {Ref: "s0:b"}}},
				{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}},
				{ID: "s0:b", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("2")}}},
			}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if tk, err := e.PollTree(ctx, "w", []string{"num"}, 0); err != nil || tk == nil {
					t.Fatalf("PollTree = %v, %v", tk, err)
				}
			}
			ids["s0:x"] = "s0:missing"
			return e, ids
		}
		alone, aloneIDs := setup()
		var got []string
		for _, it := range items {
			got = append(got, errClass(alone.CompleteTree(ctx, aloneIDs[it.task], it.worker, it.attempt, json.RawMessage(it.result))))
		}
		together, togetherIDs := setup()
		var ids, workers, results []string
		var attempts []int
		for _, it := range items {
			ids, workers = append(ids, togetherIDs[it.task]), append(workers, it.worker)
			attempts, results = append(attempts, it.attempt), append(results, it.result)
		}
		errs, txErr := together.CompleteTreesTogether(ctx, ids, workers, attempts, results)
		if txErr != nil {
			t.Fatalf("the shared transaction failed as a whole: %v", txErr)
		}
		for i := range items {
			if got[i] != want[i] {
				t.Errorf("tree result %d alone: %s, want %s", i, got[i], want[i])
			}
			if c := errClass(errs[i]); c != got[i] {
				t.Errorf("tree result %d %+v: together %s, alone %s", i, items[i], c, got[i])
			}
		}
		for _, name := range []string{"s0:root", "s0:a", "s0:b"} {
			a, err := alone.GetTask(ctx, aloneIDs[name])
			if err != nil {
				t.Fatal(err)
			}
			b, err := together.GetTask(ctx, togetherIDs[name])
			if err != nil {
				t.Fatal(err)
			}
			if a.State != b.State || a.Attempt != b.Attempt {
				t.Errorf("%s: alone %s attempt %d, together %s attempt %d", name, a.State, a.Attempt, b.State, b.Attempt)
			}
		}
		// The root got both arguments and is runnable.
		root, err := together.PollTree(ctx, "w", []string{"sum"}, 0)
		if err != nil || root == nil || len(root.Args) != 2 || string(root.Args[0]) != "1" || string(root.Args[1]) != "2" {
			t.Errorf("the root after the results together: %+v, %v; want runnable with args 1, 2", root, err)
		}
	})
}
