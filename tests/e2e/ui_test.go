package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scimesh/scimesh/internal/testenv"
)

// browser starts a headless Chromium for the test, or skips the test
// (fails it under CI) when none is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testenv.Missing(t, "no Chromium on PATH; install Debian's chromium (.ci/run does) to run the dashboard's browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// do runs browser steps, failing the test with what it was doing.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// textOf returns the text of the first element matching sel.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitFor waits until a JavaScript expression is true in the page.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("browser: waiting for %s (%s): %v", what, expr, err)
	}
}

// waitAcrossReloads is waitFor for a page that reloads meanwhile (a job's
// page does when the job ends): an evaluation cut short by the reload is
// tried again.
func waitAcrossReloads(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("browser: %s (%s) not true after 30 s", what, expr)
		}
	}
}

// shot saves a screenshot of the page under the test's artifact directory
// (kept with go test -artifacts -outputdir DIR).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardInBrowser drives the dashboard in headless Chromium against
// a running coordinator: logging in (a wrong token refused, the right one
// admitted), a running job's progress moving live as chunks complete, a
// task's log growing live, the workers, usage and shards pages, and
// cancelling the job.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"name": "dashboard", "workload": "w", "top_k": 1,
		"input": map[string]any{"chunks": chunkList(10)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}

	// Log in: a wrong token is refused, the right one lands on the jobs.
	do(t, ctx, "open the jobs", chromedp.Navigate(p.URL+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, "log in with a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := textOf(t, ctx, "#error"); !strings.Contains(got, "not a token of this coordinator") {
		t.Fatalf("login with a wrong token says %q", got)
	}
	shot(t, ctx, "1-login-refused")
	do(t, ctx, "log in", chromedp.SendKeys(chromedp.CSS("#token"), "ctok"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#jobs")))
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/ui/jobs") {
		t.Fatalf("after login the browser is at %s, want the jobs it asked for", loc)
	}
	if got := textOf(t, ctx, "#jobs tbody"); !strings.Contains(got, j.JobID) || !strings.Contains(got, "0 / 10") {
		t.Fatalf("jobs page lacks the job or its counts: %q", got)
	}
	shot(t, ctx, "2-jobs")

	// The job's page follows its progress without a reload.
	do(t, ctx, "open the job", chromedp.Navigate(p.URL+"/ui/jobs/"+j.JobID), chromedp.WaitVisible(chromedp.CSS("#progress")))
	if got := textOf(t, ctx, "#completed"); got != "0" {
		t.Fatalf("completed chunks shown %q, want 0", got)
	}
	if got := textOf(t, ctx, "#best-caption"); got != "No chunk has completed yet." {
		t.Fatalf("best rows caption %q before any chunk", got)
	}
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void]("window.notReloaded = true"))
	for i := range 3 {
		var tk taskOut
		if s := call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &tk); s != 200 {
			t.Fatalf("claim %d: %d", i, s)
		}
		if s := call(t, "POST", p.URL+"/tasks/"+tk.TaskID+"/result", "wtok",
			map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "output": fmt.Sprintf("id,score\nm%d,%d\n", i, i+1)}, nil); s != 200 {
			t.Fatalf("result %d: %d", i, s)
		}
	}
	// The chart's line ends at 3 of 10 chunks: y = 160 × (1 − 3/10); the
	// best row so far (top_k 1) is the third chunk's.
	waitFor(t, ctx, "the progress, the chart and the best rows to reach 3 chunks live",
		`document.getElementById("completed").textContent === "3" && document.getElementById("progress").value > 0.29 &&
		document.getElementById("chart-caption").textContent.startsWith("3 of 10") &&
		document.getElementById("chart-line").getAttribute("points").endsWith("600.0,112.0") &&
		document.getElementById("best-caption").textContent === "The best 1 rows over 3 of 10 chunks." &&
		document.querySelector("#best thead").textContent === "idscore" &&
		document.querySelector("#best tbody").textContent === "m23" && window.notReloaded === true`)
	if got := textOf(t, ctx, "#status"); got != "running" {
		t.Fatalf("job status shown %q, want running", got)
	}
	shot(t, ctx, "3-job-progress")

	// A task's log, then a line appended while the page is open.
	var tk taskOut
	if s := call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &tk); s != 200 {
		t.Fatalf("claim: %d", s)
	}
	logLines := func(lines ...string) {
		t.Helper()
		if s := call(t, "POST", p.URL+"/tasks/"+tk.TaskID+"/logs", "wtok",
			map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "lines": lines}, nil); s != 204 {
			t.Fatalf("append log: %d", s)
		}
	}
	logLines("loading molecules", "scored 120 rows")
	do(t, ctx, "open the task", chromedp.Navigate(p.URL+"/ui/tasks/"+tk.TaskID), chromedp.WaitVisible(chromedp.CSS("#log")))
	waitFor(t, ctx, "the log's first lines", `document.getElementById("log").textContent.includes("scored 120 rows")`)
	if got := textOf(t, ctx, "#lease-owner"); got != "w1" {
		t.Fatalf("lease owner shown %q, want w1", got)
	}
	logLines("half way there")
	waitFor(t, ctx, "a new log line live", `document.getElementById("log").textContent.includes("[attempt 1] half way there")`)
	shot(t, ctx, "4-task-log")

	// Workers and shards.
	do(t, ctx, "open the workers", chromedp.Navigate(p.URL+"/ui/workers"), chromedp.WaitVisible(chromedp.CSS("#workers")))
	if got := textOf(t, ctx, "#workers tbody"); !strings.Contains(got, "w1") || !strings.Contains(got, tk.TaskID) {
		t.Fatalf("workers page lacks w1 and its task: %q", got)
	}
	if got := textOf(t, ctx, "#workers tbody td.account") + " " + textOf(t, ctx, "#workers tbody td.trusted"); got != "pool yes" {
		t.Fatalf("w1's account and trust on the workers page: %q, want the pool's, trusted", got)
	}
	shot(t, ctx, "5-workers")
	// The usage page, from the nav: the three chunks run above, charged
	// to admin.
	do(t, ctx, "open the usage", chromedp.Click(chromedp.CSS(`nav a[href="/ui/usage"]`)), chromedp.WaitVisible(chromedp.CSS("#usage-chart")))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#usage-chart rect.bar").length`)); n != 1 {
		t.Fatalf("the usage chart has %d bars, want today's", n)
	}
	if got := textOf(t, ctx, "#usage tbody tr.account"); !strings.Contains(got, "admin") || !strings.Contains(got, "3") {
		t.Fatalf("the usage table lacks admin's 3 tasks: %q", got)
	}
	if got := textOf(t, ctx, "#worker-usage tbody tr.workers"); !strings.Contains(got, "pool") || !strings.Contains(got, "3") {
		t.Fatalf("the table of workers' work lacks the pool's 3 tasks: %q", got)
	}
	shot(t, ctx, "5b-usage")
	do(t, ctx, "open the shards", chromedp.Navigate(p.URL+"/ui/shards"), chromedp.WaitVisible(chromedp.CSS("#outbox")))
	shot(t, ctx, "6-shards")
	do(t, ctx, "draw the job's tree", chromedp.Navigate(p.URL+"/ui/trees/"+j.JobID+"-root"), chromedp.WaitVisible(chromedp.CSS("#tree")))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tree li li").length`)); n != 10 {
		t.Fatalf("the job's tree shows %d chunks under its root, want 10", n)
	}
	shot(t, ctx, "7-tree")

	// Cancel the job from its page.
	do(t, ctx, "cancel the job", chromedp.Navigate(p.URL+"/ui/jobs/"+j.JobID), chromedp.WaitVisible(chromedp.CSS("#cancel")),
		chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitNotPresent(chromedp.CSS("#cancel")))
	waitFor(t, ctx, "the cancelled status", `document.getElementById("status").textContent === "cancelled"`)
	var after jobOut
	call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &after)
	if after.Status != "cancelled" {
		t.Fatalf("job after cancelling in the dashboard: %s, want cancelled", after.Status)
	}
	shot(t, ctx, "8-cancelled")
	fmt.Fprintln(os.Stderr, "dashboard screenshots in", t.ArtifactDir())
}

// TestNewJobInBrowser makes a job from the dashboard as a scientist would,
// in headless Chromium: signed in with an account's token, it opens the
// new-job page from the jobs page, uploads a CSV (the progress bar
// filling), chooses the workload a real worker process announces, sets
// the parameters and settings, creates the job and lands on its page,
// which follows it to completed and draws its chart with labelled axes;
// the result it downloads is the expected bytes, and the job is the
// account's.
func TestNewJobInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
	var ada struct{ Token string }
	if s := call(t, "POST", p.URL+"/accounts", "ctok", map[string]any{"name": "ada"}, &ada); s != 201 {
		t.Fatalf("create ada: %d", s)
	}
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w1", "--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))

	// The table, and what its best 5 rows by value are.
	var table strings.Builder
	table.WriteString("id,value\n")
	type row struct{ id, value int }
	var rows []row
	for i := range 60 {
		r := row{i, i * 37 % 101}
		rows = append(rows, r)
		fmt.Fprintf(&table, "r%d,%d\n", r.id, r.value)
	}
	slices.SortFunc(rows, func(a, b row) int { return b.value - a.value })
	want := "id,score\n"
	for _, r := range rows[:5] {
		want += fmt.Sprintf("r%d,%d\n", r.id, r.value)
	}
	path := filepath.Join(dir, "molecules.csv")
	if err := os.WriteFile(path, []byte(table.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var w struct{ Workloads []struct{ Name string } }
		if call(t, "GET", p.URL+"/workloads", "ctok", nil, &w); len(w.Workloads) == 1 && w.Workloads[0].Name == "copy" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker's workload is not listed after 30 s")
		}
	}

	do(t, ctx, "open the jobs", chromedp.Navigate(p.URL+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, "log in as ada", chromedp.SendKeys(chromedp.CSS("#token"), ada.Token), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#new-job-link")))
	do(t, ctx, "open the new-job page", chromedp.Click(chromedp.CSS("#new-job-link")), chromedp.WaitVisible(chromedp.CSS("#file")))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("submit").disabled`)); !n {
		t.Fatal("the form may be sent before a file is uploaded")
	}
	if got := textOf(t, ctx, "#workload"); !strings.Contains(got, "copy (1 worker)") {
		t.Fatalf("the workloads offered: %q, want copy, announced by one worker", got)
	}
	do(t, ctx, "choose the file", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{path}))
	waitFor(t, ctx, "the upload to finish", `document.getElementById("upload-id").value !== "" && !document.getElementById("submit").disabled`)
	if got := textOf(t, ctx, "#upload-status"); got != "Uploaded molecules.csv: 60 rows below the header, "+fmt.Sprint(table.Len())+" bytes." {
		t.Fatalf("upload status %q", got)
	}
	if full, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const b = document.getElementById("upload-progress"); return b.value === b.max && b.max > 1; })()`)); !full {
		t.Fatal("the progress bar is not full after the upload")
	}
	if name, _ := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#name"))); name != "molecules.csv" {
		t.Fatalf("the job's name defaults to %q, want the file's", name)
	}
	do(t, ctx, "fill the form", chromedp.SetValue(chromedp.CSS("#workload"), "copy"),
		chromedp.SendKeys(chromedp.CSS("#parameters"), "label=from the browser\nrepeat:=2"),
		chromedp.SetValue(chromedp.CSS("#top-k"), "5"), chromedp.SetValue(chromedp.CSS("#chunk-rows"), "10"),
		chromedp.SetValue(chromedp.CSS("#score-column"), "score"), chromedp.SetValue(chromedp.CSS("#order"), "desc"))
	shot(t, ctx, "newjob-1-form")

	do(t, ctx, "create the job", chromedp.Click(chromedp.CSS("#submit")), chromedp.WaitVisible(chromedp.CSS("#live")))
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	id, ok := strings.CutPrefix(loc, p.URL+"/ui/jobs/")
	if !ok {
		t.Fatalf("after creating the job the browser is at %s, want its page", loc)
	}
	id, _ = url.PathUnescape(id)
	waitAcrossReloads(t, ctx, "the job to complete and its page to show it", `document.getElementById("download") !== null && document.getElementById("status").textContent === "completed" && document.getElementById("chart-caption") !== null`)
	if got := textOf(t, ctx, "#chart-caption"); !strings.HasPrefix(got, "6 of 6 chunks") {
		t.Fatalf("chart caption %q, want 6 of 6 chunks", got)
	}
	if got := textOf(t, ctx, "#chart-xtitle"); got != "time since the job was created (s)" {
		t.Fatalf("time axis titled %q", got)
	}
	if got := textOf(t, ctx, "#chart-yticks"); !strings.HasPrefix(got, "0") || !strings.HasSuffix(got, "6") {
		t.Fatalf("chunks axis labelled %q, want 0 to 6", got)
	}
	shot(t, ctx, "newjob-2-completed")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.getElementById("download").href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil || got != want {
		t.Fatalf("downloaded result %q, %v; want %q", got, err, want)
	}
	var j struct {
		Owner, Name, Workload string
		Parameters            map[string]any
		TopK                  int `json:"top_k"`
	}
	call(t, "GET", p.URL+"/jobs/"+id, "ctok", nil, &j)
	if j.Owner != "ada" || j.Name != "molecules.csv" || j.Workload != "copy" || j.TopK != 5 || j.Parameters["label"] != "from the browser" || j.Parameters["repeat"] != 2.0 {
		t.Fatalf("the job made in the browser: %+v", j)
	}
	fmt.Fprintln(os.Stderr, "new-job screenshots in", t.ArtifactDir())
}
