package engine_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// TestLeaseResultReplay checks that the holder's result completes the task
// once: the same result again changes nothing and succeeds, a different
// one is ErrConflict (409 on every transport), and the same result from
// anyone else is ErrLeaseLost.
func TestLeaseResultReplay(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 3)
	ctx := t.Context()
	first := b.result("w1", 1, "id,score\na,1\n")
	got, err := b.e.CompleteTask(ctx, first)
	if err != nil || got.State != domain.TaskCompleted {
		t.Fatalf("CompleteTask = %v, %v; want completed", got, err)
	}
	done := b.stored(t)

	b.clock.Advance(time.Minute) // past the lease: a replay needs none
	again, err := b.e.CompleteTask(ctx, first)
	if err != nil || again.State != domain.TaskCompleted {
		t.Fatalf("replayed CompleteTask = %v, %v; want the completed task", again, err)
	}
	if after := b.stored(t); after.Version != done.Version || !after.FinishedAt.Equal(done.FinishedAt) {
		t.Fatalf("the replay wrote: version %d, finished %v; was %d, %v", after.Version, after.FinishedAt, done.Version, done.FinishedAt)
	}
	for _, c := range []struct {
		what string
		p    engine.CompleteTaskParams
		want error
	}{
		{"a different result", b.result("w1", 1, "id,score\nb,2\n"), domain.ErrConflict},
		{"the same result from another worker", b.result("w2", 1, "id,score\na,1\n"), domain.ErrLeaseLost},
		{"the same result from another attempt", b.result("w1", 2, "id,score\na,1\n"), domain.ErrLeaseLost},
	} {
		if _, err := b.e.CompleteTask(ctx, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: CompleteTask = %v, want %v", c.what, err, c.want)
		}
	}
	if after := b.stored(t); after.Version != done.Version || string(after.Result) != string(first.Output) {
		t.Fatalf("refused results changed the task: version %d, result %q", after.Version, after.Result)
	}
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
