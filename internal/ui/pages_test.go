package ui

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/engine"
)

// TestWorkersPage: the workers page shows each worker's workloads ("any"
// for one that names none) and the tasks it completed, a replayed result
// not counted twice.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	srv, e, _ := setup(t)
	ctx := t.Context()
	views, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w1", Workloads: []string{"w", "dock"}, Max: 2})
	if err != nil || len(views) != 2 {
		t.Fatalf("claim: %d tasks, %v", len(views), err)
	}
	for _, v := range append(views, views[0]) { // the first result twice
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: v.ID, WorkerID: "w1", Attempt: v.Attempt, Output: []byte("id,score\na,1\n")}); err != nil {
			t.Fatalf("result of %s: %v", v.ID, err)
		}
	}
	if _, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w2"}); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	login(t, c, srv.URL, "ctok")
	resp, page := get(t, c, srv.URL+"/ui/workers")
	row := func(id string) string {
		i := strings.Index(page, "<td>"+id+"</td>")
		if i < 0 {
			t.Fatalf("workers page (%d) lacks %s:\n%s", resp.StatusCode, id, page)
		}
		return page[i : i+strings.Index(page[i:], "</tr>")]
	}
	if r := row("w1"); !strings.Contains(r, `<td class="workloads"><code>dock</code>, <code>w</code></td>`) || !strings.Contains(r, `<td class="done">2</td>`) {
		t.Errorf("w1's row lacks its workloads or its 2 tasks done:\n%s", r)
	}
	if r := row("w2"); !strings.Contains(r, `<td class="workloads">any</td>`) || !strings.Contains(r, `<td class="done">0</td>`) {
		t.Errorf("w2's row lacks 'any' workload or its 0 tasks done:\n%s", r)
	}
}
