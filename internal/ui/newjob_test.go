package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// TestNewJob: the new-job page offers the workloads a worker announced;
// an upload needs the session's form token, and a bad table is refused
// naming its line; a form with bad input shows what is wrong and creates
// nothing; a good one creates the job, the signed-in account's, as the
// form says, and opens its page.
func TestNewJob(t *testing.T) {
	t.Parallel()
	srv, e, _ := setup(t)
	ctx := t.Context()
	_, ada, err := e.CreateAccount(ctx, domain.Account{Name: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w1", Workloads: []string{"copy", "dock"}}); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	login(t, c, srv.URL, ada)
	resp, page := get(t, c, srv.URL+"/ui/jobs/new")
	if resp.StatusCode != 200 || !strings.Contains(page, `<option value="copy">copy (1 worker)</option>`) || !strings.Contains(page, `<option value="dock">`) ||
		!strings.Contains(page, `<option value="trusted" selected>`) || !strings.Contains(page, `<option value="2" selected>2</option>`) {
		t.Fatalf("new-job page: %d, without the workloads w1 announced:\n%s", resp.StatusCode, page)
	}
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("new-job page has no form token:\n%s", page)
	}
	csrf := m[1]

	upload := func(token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/ui/upload", strings.NewReader(body))
		req.Header.Set("Content-Type", "text/csv")
		if token != "" {
			req.Header.Set("X-CSRF-Token", token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	table := "id,value\na,1\nb,2\nc,3\n"
	if status, body := upload("", table); status != http.StatusForbidden {
		t.Errorf("upload without the form token: %d %s, want 403", status, body)
	}
	if status, body := upload(strings.Repeat("0", 64), table); status != http.StatusForbidden {
		t.Errorf("upload with a wrong form token: %d %s, want 403", status, body)
	}
	if status, body := upload(csrf, "id,value\na,1\nb\n"); status != http.StatusBadRequest || !strings.Contains(body, "line 3") {
		t.Errorf("upload of a bad table: %d %s, want 400 naming line 3", status, body)
	}
	status, body := upload(csrf, table)
	var up struct {
		UploadID string `json:"upload_id"`
		Rows     int    `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &up); status != http.StatusCreated || err != nil || up.Rows != 4 {
		t.Fatalf("upload: %d %s, want 201 with 4 rows", status, body)
	}

	post := func(form url.Values) (*http.Response, string) {
		t.Helper()
		resp, err := c.PostForm(srv.URL+"/ui/jobs/new", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	good := url.Values{"csrf": {csrf}, "upload_id": {up.UploadID}, "upload_name": {"t.csv"}, "name": {"t.csv"}, "workload": {"copy"},
		"parameters": {"radius=2\n\nexact:=true"}, "top_k": {"2"}, "chunk_rows": {"1"}, "score_column": {"value"}, "order": {"asc"},
		"workers": {"any"}, "quorum": {"3"}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vs := range good {
			f[key] = vs
		}
		f.Set(k, v)
		return f
	}
	for _, c := range []struct {
		form       url.Values
		status     int
		want, what string
	}{
		{with("csrf", ""), http.StatusForbidden, "stale", "no form token"},
		{with("upload_id", ""), http.StatusBadRequest, "choose a CSV file", "no file"},
		{with("workload", ""), http.StatusBadRequest, "choose a workload", "no workload"},
		{with("top_k", "0"), http.StatusBadRequest, "top_k", "top_k 0"},
		{with("top_k", "many"), http.StatusBadRequest, "top_k &#34;many&#34; is not a whole number", "top_k many"},
		{with("chunk_rows", "-1"), http.StatusBadRequest, "chunk_rows", "chunk_rows -1"},
		{with("order", "sideways"), http.StatusBadRequest, "order", "order sideways"},
		{with("parameters", "radius"), http.StatusBadRequest, "write KEY=VALUE", "a parameter line without ="},
		{with("parameters", `{"radius": `), http.StatusBadRequest, "not a JSON object", "bad JSON parameters"},
		{with("upload_id", "s0:uno-such-upload"), http.StatusNotFound, "does not exist", "an upload that does not exist"},
		{with("workers", "everyone"), http.StatusBadRequest, "workers &#34;everyone&#34;", "workers everyone"},
		{with("quorum", "9"), http.StatusBadRequest, "quorum is 9", "quorum 9"},
	} {
		resp, page := post(c.form)
		if resp.StatusCode != c.status || !strings.Contains(page, c.want) {
			t.Errorf("new job with %s: %d, want %d saying %q:\n%s", c.what, resp.StatusCode, c.status, c.want, page)
		}
		if c.status == http.StatusBadRequest && c.form.Get("upload_id") != "" && !strings.Contains(page, `value="`+up.UploadID+`"`) {
			t.Errorf("new job with %s: the form shown again lost the upload", c.what)
		}
	}
	if jobs, _, err := e.ListJobs(domain.WithCaller(ctx, domain.Caller{Account: "ada"}), engine.ListJobsParams{}); err != nil || len(jobs) != 0 {
		t.Fatalf("ada's jobs after bad forms: %d, %v; want none", len(jobs), err)
	}

	resp, _ = post(good)
	id, ok := strings.CutPrefix(resp.Header.Get("Location"), "/ui/jobs/")
	if resp.StatusCode != http.StatusSeeOther || !ok {
		t.Fatalf("new job: %d to %q, want the job's page", resp.StatusCode, resp.Header.Get("Location"))
	}
	j, err := e.GetJob(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Owner != "ada" || j.Name != "t.csv" || j.Workload != "copy" || string(j.Parameters) != `{"exact":true,"radius":"2"}` ||
		j.TopK != 2 || j.ChunkRows != 1 || j.ScoreColumn != "value" || j.Order != domain.Asc || j.Tasks.Total != 3 ||
		j.Workers != domain.WorkersAny || j.Quorum != 3 {
		t.Errorf("job made by the form: %+v, %+v", j.Job, j.Tasks)
	}
	_, page = get(t, c, srv.URL+"/ui/jobs/"+id)
	if !strings.Contains(page, `<span id="workers">any worker, 3 accounts agreeing</span>`) {
		t.Errorf("the job's page does not say who runs it:\n%s", page)
	}
}
