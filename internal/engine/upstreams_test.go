package engine_test

import (
	"slices"
	"testing"

	"github.com/scimesh/scimesh/internal/engine"
)

// TestStitchUpstreams: a job's stitch task lists the job's chunk task IDs
// by chunk index, exactly those the job's tasks are stored under; a limit
// keeps the first ones and still tells how many there are.
func TestStitchUpstreams(t *testing.T) {
	t.Parallel()
	e := newEngine(openStore(t), engine.Config{})
	v, _, err := e.CreateJob(t.Context(), spec(7), "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, err := e.ListTasks(t.Context(), engine.ListTasksParams{JobID: v.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tk := range tasks {
		want = append(want, tk.ID)
		if tk.DownstreamID != v.RootTaskID {
			t.Errorf("chunk task %s flows to %q; want the stitch task %s", tk.ID, tk.DownstreamID, v.RootTaskID)
		}
	}
	root, err := e.GetTask(t.Context(), v.RootTaskID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit int
		want  []string
	}{
		{0, want}, {-1, want}, {7, want}, {100, want}, {3, want[:3]}, {1, want[:1]},
	} {
		ids, total := engine.StitchUpstreams(root.Job, c.limit)
		if !slices.Equal(ids, c.want) || total != 7 {
			t.Errorf("StitchUpstreams(limit %d) = %v, %d; want %v, 7", c.limit, ids, total, c.want)
		}
	}
}
