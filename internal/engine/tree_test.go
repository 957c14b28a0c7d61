package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

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
