package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// fairSetup makes accounts alice (weight 1) and bob (weight 3) on e, and
// a job of 20 chunks of each, alice's first.
func fairSetup(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx := t.Context()
	for _, a := range []domain.Account{{Name: "alice"}, {Name: "bob", Weight: 3}} {
		if _, _, err := e.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: a.Name}), spec(20), ""); err != nil {
			t.Fatal(err)
		}
	}
}

// owners names the owner of each task.
func owners(tasks []*domain.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = "none"
		if tk != nil {
			out[i] = tk.Owner
		}
	}
	return out
}

// TestScheduling: with fair scheduling (the default) claims share the
// workers between accounts by weight, whether made one by one or served
// together (as long-polling claims woken by new work are); with fifo,
// the oldest job's tasks go first, whoever owns them.
func TestScheduling(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		workers := []string{"w1", "w2", "w3", "w4", "w5", "w6", "w7"} // fewer than 8: one task a pick (store.ClaimFair)
		alone := func(e *engine.Engine) []string {
			var got []*domain.Task
			for _, w := range workers {
				v, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: w})
				if err != nil || len(v) != 1 {
					t.Fatalf("claim by %s: %d tasks, %v", w, len(v), err)
				}
				got = append(got, v[0].Task)
			}
			return owners(got)
		}
		together := func(e *engine.Engine) []string {
			got, errs := e.ClaimTogether(ctx, workers)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			return owners(got)
		}
		// Leases per weight, ties to the account served longest ago
		// (never served: by name).
		want := []string{"alice", "bob", "bob", "bob", "alice", "bob", "bob"}
		for _, c := range []struct {
			name  string
			cfg   engine.Config
			claim func(*engine.Engine) []string
			want  []string
		}{
			{"fair alone", engine.Config{}, alone, want},
			{"fair together", engine.Config{Scheduling: engine.SchedulingFair}, together, want},
			{"fifo alone", engine.Config{Scheduling: engine.SchedulingFIFO}, alone, slices.Repeat([]string{"alice"}, 7)},
			{"fifo together", engine.Config{Scheduling: engine.SchedulingFIFO}, together, slices.Repeat([]string{"alice"}, 7)},
		} {
			e := newEngine(open(), c.cfg)
			fairSetup(t, e)
			if got := c.claim(e); !slices.Equal(got, c.want) {
				t.Errorf("%s: owners of the tasks claimed %q, want %q", c.name, got, c.want)
			}
		}
	})
}

// TestSchedulingMaxRunning: an account at its max_running gets no more
// leases, and its claims wait (no error) until one of its leases ends.
func TestSchedulingMaxRunning(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		e := newEngine(open(), engine.Config{})
		if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "capped", MaxRunning: 2}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: "capped"}), spec(10), ""); err != nil {
			t.Fatal(err)
		}
		got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 5})
		if err != nil || len(got) != 2 {
			t.Fatalf("a claim of 5 got %d tasks, %v; want the 2 of max_running", len(got), err)
		}
		none, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 5})
		if err != nil || len(none) != 0 {
			t.Fatalf("a claim at the cap got %d tasks, %v; want none and no error", len(none), err)
		}
		done := e.CompleteTasks(ctx, []engine.CompleteTaskParams{{TaskID: got[0].ID, WorkerID: "w", Attempt: got[0].Attempt, Output: []byte("id,score\nx,1\n")}})
		if done[0].Err != nil {
			t.Fatal(done[0].Err)
		}
		more, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 5})
		if err != nil || len(more) != 1 {
			t.Fatalf("a claim after one lease ended got %d tasks, %v; want 1", len(more), err)
		}
	})
}

func TestParseScheduling(t *testing.T) {
	for in, want := range map[string]engine.Scheduling{"fair": engine.SchedulingFair, "fifo": engine.SchedulingFIFO, "FIFO": "", "": "", "lottery": ""} {
		got, err := engine.ParseScheduling(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("ParseScheduling(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestSchedulingSeesNewWorkAtOnce: a claim right after another account's
// job was created serves that account, though the claims before it
// remembered who had work (store.ClaimFair): new work moves the engine's
// work epoch.
func TestSchedulingSeesNewWorkAtOnce(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		now := time.Now()
		e := newEngine(open(), engine.Config{Now: func() time.Time { return now }}) // a clock that stands still
		if _, _, err := e.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: "alice"}), spec(10), ""); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w"}); err != nil || len(got) != 1 || got[0].Owner != "alice" {
				t.Fatalf("claim with alice's work alone: %v, %v", got, err)
			}
		}
		if _, _, err := e.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: "bob"}), spec(10), ""); err != nil {
			t.Fatal(err)
		}
		got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w"})
		if err != nil || len(got) != 1 || got[0].Owner != "bob" {
			t.Fatalf("claim after bob's job: %v, %v; want bob's task, as bob has no lease", got, err)
		}
	})
}
