package engine_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestTreeView: the tree a shard draws holds its own tasks, each with the
// upstreams it takes results from, on this shard or another, resolved or not.
func TestTreeView(t *testing.T) {
	t.Parallel()
	mesh, _, _ := newMesh(t, "s0", "s1")
	ctx := t.Context()
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s1:a"), arg("1"), ref("s0:c")}},
		{ID: "s1:a", Workload: "f", Args: []domain.TreeArg{ref("s0:l")}},
		{ID: "s0:c", Workload: "leaf"},
		{ID: "s0:l", Workload: "leaf"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		nodes, err := mesh["s0"].GetTree(ctx, ids["s0:c"])
		if err != nil {
			t.Fatalf("Tree: %v", err)
		}
		got := map[string][]string{}
		for _, n := range nodes {
			got[n.ID] = n.Upstreams
		}
		want := map[string][]string{ids["s0:r"]: {ids["s1:a"], ids["s0:c"]}, ids["s0:c"]: nil, ids["s0:l"]: nil}
		if len(got) != len(want) {
			t.Fatalf("%s: tree on s0 %v, want %v", what, got, want)
		}
		for id, w := range want {
			if g, ok := got[id]; !ok || !slices.Equal(g, w) {
				t.Fatalf("%s: tree on s0 %v, want %v", what, got, want)
			}
		}
	}
	check("submitted")
	// A result that has arrived still draws its edge.
	for range 2 { // c and l, both on s0
		task := pollOne(t, mesh["s0"])
		if err := mesh["s0"].CompleteTree(ctx, task.ID, "w", task.Attempt, json.RawMessage(`2`)); err != nil {
			t.Fatal(err)
		}
	}
	if st := state(t, mesh["s0"], ids["s0:c"]); st != domain.TaskCompleted {
		t.Fatalf("c is %s, want completed", st)
	}
	check("with c's result in r")
}
