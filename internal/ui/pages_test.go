package ui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// TestWorkersPage: the workers page shows each worker's own ID, its key's
// account ("pool" for the pool's) and name, its trust, its workloads
// ("any" for one that names none) and the tasks it completed, a replayed
// result not counted twice. An account sees the workers of its own keys
// alone.
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
	// ada's machine, enrolled with a key she has, calls.
	_, ada, err := e.CreateAccount(ctx, domain.Account{Name: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateWorkerKey(domain.WithCaller(ctx, domain.Caller{Account: "ada"}), "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ClaimTasks(domain.WithPrincipal(ctx, domain.Principal{Account: "ada", Key: "laptop"}), engine.ClaimTasksParams{WorkerID: "ada-box"}); err != nil {
		t.Fatal(err)
	}
	page := func(token string) (string, func(id string) string) {
		c := client(t)
		login(t, c, srv.URL, token)
		resp, page := get(t, c, srv.URL+"/ui/workers")
		return page, func(id string) string {
			t.Helper()
			i := strings.Index(page, "<td>"+id+"</td>")
			if i < 0 {
				t.Fatalf("workers page (%d) lacks %s:\n%s", resp.StatusCode, id, page)
			}
			return page[i : i+strings.Index(page[i:], "</tr>")]
		}
	}
	_, row := page("ctok")
	if r := row("w1"); !strings.Contains(r, `<td class="account">pool</td><td class="key"></td><td class="trusted">yes</td>`) ||
		!strings.Contains(r, `<td class="workloads"><code>dock</code>, <code>w</code></td>`) || !strings.Contains(r, `<td class="done">2</td>`) {
		t.Errorf("w1's row lacks the pool's trust, its workloads or its 2 tasks done:\n%s", r)
	}
	if r := row("w2"); !strings.Contains(r, `<td class="workloads">any</td>`) || !strings.Contains(r, `<td class="done">0</td>`) {
		t.Errorf("w2's row lacks 'any' workload or its 0 tasks done:\n%s", r)
	}
	adaRow := `<td class="account">ada</td><td class="key">laptop</td><td class="trusted">no</td>`
	if r := row("ada-box"); !strings.Contains(r, adaRow) {
		t.Errorf("ada-box's row lacks ada's untrusted key laptop:\n%s", r)
	}
	adas, row := page(ada)
	if r := row("ada-box"); !strings.Contains(r, adaRow) {
		t.Errorf("ada's page: ada-box's row lacks her untrusted key laptop:\n%s", r)
	}
	if strings.Contains(adas, "<td>w1</td>") || strings.Contains(adas, "<td>w2</td>") {
		t.Errorf("ada's page shows the pool's workers:\n%s", adas)
	}
}

// TestJobPageBestRows: a job's page shows the columns it joins and its
// best rows so far, with the joined values, over the chunks completed.
func TestJobPageBestRows(t *testing.T) {
	t.Parallel()
	srv, e, _ := setup(t)
	ctx := t.Context()
	up, err := e.CreateUpload(ctx, strings.NewReader("id,smiles\na,CCO\nb,N\nc,O\n"), -1)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := e.CreateJob(ctx, &domain.JobSpec{Workload: "mols", Parameters: json.RawMessage("{}"), UploadID: up.ID,
		ChunkRows: 1, HasHeader: true, TopK: 2, ScoreColumn: "score", Order: domain.Desc, MaxAttempts: 3, LeaseSeconds: 60,
		Columns: []string{"smiles"}, IDColumn: "id"}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	login(t, c, srv.URL, "ctok")
	_, page := get(t, c, srv.URL+"/ui/jobs/"+j.ID)
	if !strings.Contains(page, `<span id="columns"><code>smiles</code></span> joined by <code>id</code>`) ||
		!strings.Contains(page, "No chunk has completed yet.") {
		t.Errorf("a new job's page lacks its columns or says it has best rows:\n%s", page)
	}
	for _, out := range []string{"id,score\na,0.5\n", "id,score\nb,0.9\n"} {
		views, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w1", Workloads: []string{"mols"}})
		if err != nil || len(views) != 1 {
			t.Fatalf("claim: %d tasks, %v", len(views), err)
		}
		if _, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: views[0].ID, WorkerID: "w1", Attempt: 1, Output: []byte(out)}); err != nil {
			t.Fatal(err)
		}
	}
	_, page = get(t, c, srv.URL+"/ui/jobs/"+j.ID)
	want := `<thead><tr><th>id</th><th>score</th><th>smiles</th></tr></thead>
<tbody><tr><td>b</td><td>0.9</td><td>N</td></tr><tr><td>a</td><td>0.5</td><td>CCO</td></tr></tbody>`
	if !strings.Contains(page, "The best 2 rows over 2 of 3 chunks.") || !strings.Contains(page, want) {
		t.Errorf("the page lacks the best rows over 2 of 3 chunks:\n%s", page)
	}
}
