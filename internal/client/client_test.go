package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// coordinator is a real coordinator on a temporary SQLite database, with
// a client of each role.
type coordinator struct {
	url            string
	user, worker   *client.Client
	wrong, missing *client.Client // an unknown token; no token at all
}

func setup(t *testing.T) *coordinator {
	t.Helper()
	return setupAt(t, "127.0.0.1:0")
}

// setupAt is setup with the coordinator listening on addr.
func setupAt(t *testing.T, addr string) *coordinator {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "scimesh.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	blobs, err := blob.OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatalf("open blobs: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := engine.New(st, engine.Config{Blobs: blobs, Shard: "s0", Logger: log,
		ReapInterval: 50 * time.Millisecond, StitchInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	srv := httptest.NewUnstartedServer(httpapi.New(eng, auth.NewGate(auth.Tokens{Worker: "wtok", Client: "ctok"}), log, 0))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { eng.Run(ctx) })
	c := &coordinator{
		url:     srv.URL,
		user:    client.New(srv.URL, "ctok"),
		worker:  client.New(srv.URL, "wtok"),
		wrong:   client.New(srv.URL, "nope"),
		missing: client.New(srv.URL, ""),
	}
	t.Cleanup(func() {
		for _, cl := range []*client.Client{c.user, c.worker, c.wrong, c.missing} {
			cl.CloseIdleConnections()
		}
		cancel()
		loops.Wait()
		srv.Close()
		st.Close()
	})
	return c
}

func chunks(n int) []client.ChunkRef {
	out := make([]client.ChunkRef, n)
	for i := range out {
		out[i] = client.ChunkRef{URI: "https://data.example.org/c" + string(rune('0'+i)) + ".csv", SHA256: strings.Repeat("ab", 32), Bytes: 10}
	}
	return out
}

// wantCode fails the test unless err is a *client.Error with status and code.
func wantCode(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	e := client.AsError(err)
	if e == nil || e.Status != status || e.Code != code {
		t.Fatalf("error %v (%T), want %d %s", err, err, status, code)
	}
	return e
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	req := &client.JobRequest{
		Name: "lifecycle", Workload: "w", TopK: 2, Parameters: json.RawMessage(`{"query":"ff"}`),
		Input: client.JobInput{Chunks: chunks(2)}, LeaseSeconds: 30,
	}
	j, err := c.user.CreateJob(ctx, req, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != client.JobPending || j.Tasks.Total != 2 || j.TopK != 2 || j.ScoreColumn != "score" || j.Order != client.Desc {
		t.Fatalf("created job %+v", j)
	}
	again, err := c.user.CreateJob(ctx, req, "key-1")
	if err != nil || again.JobID != j.JobID {
		t.Fatalf("replay with the same Idempotency-Key: %v, %v; want job %s", again, err, j.JobID)
	}
	req2 := *req
	req2.TopK = 3
	_, err = c.user.CreateJob(ctx, &req2, "key-1")
	wantCode(t, err, 409, client.CodeConflict)

	other, err := c.user.CreateJob(ctx, &client.JobRequest{Workload: "w", Input: client.JobInput{Chunks: chunks(1)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.user.ListJobs(ctx, client.ListOptions{Limit: 1})
	if err != nil || len(page.Jobs) != 1 || page.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page2, err := c.user.ListJobs(ctx, client.ListOptions{Limit: 1, Cursor: page.NextCursor})
	if err != nil || len(page2.Jobs) != 1 || page2.Jobs[0].JobID == page.Jobs[0].JobID {
		t.Fatalf("second page: %+v, %v", page2, err)
	}
	if _, err := c.user.ListJobs(ctx, client.ListOptions{State: "pending"}); err == nil {
		t.Fatal("ListJobs with a task state: no error")
	}
	if _, err := c.user.Cancel(ctx, other.JobID); err != nil {
		t.Fatal(err)
	}

	_, err = c.user.Result(ctx, j.JobID)
	if !client.IsNotReady(err) {
		t.Fatalf("result before completion: %v, want not_ready", err)
	}

	none, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1", Workloads: []string{"other"}})
	if none != nil || err != nil {
		t.Fatalf("claim of another workload: %+v, %v; want none", none, err)
	}
	for i := range 2 {
		before := time.Now()
		tk, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1", Workloads: []string{"w"}, WaitSeconds: 1})
		if err != nil || tk == nil {
			t.Fatalf("claim: %+v, %v", tk, err)
		}
		if tk.JobID != j.JobID || tk.ChunkIndex != i || tk.Attempt != 1 || tk.TopK != 2 || string(tk.Parameters) != `{"query":"ff"}` ||
			tk.Input.URL != req.Input.Chunks[i].URI || tk.Input.SHA256 != req.Input.Chunks[i].SHA256 || tk.Input.Bytes != 10 {
			t.Fatalf("claimed task %+v", tk)
		}
		// The local deadline lies within the lease, a second short at most
		// (the Date header has whole seconds) beyond the call's latency.
		after := time.Now()
		if tk.LeaseDeadline.After(after.Add(30*time.Second)) || tk.LeaseDeadline.Before(before.Add(29*time.Second-after.Sub(before))) {
			t.Fatalf("lease deadline %v after the claim (which took %v); the lease is 30s", tk.LeaseDeadline.Sub(before), after.Sub(before))
		}
		l, err := c.worker.Heartbeat(ctx, tk.TaskID, "w1", 1)
		if err != nil || !l.ExpiresAt.After(*tk.LeaseExpiresAt) && !l.ExpiresAt.Equal(*tk.LeaseExpiresAt) || l.Deadline.IsZero() {
			t.Fatalf("heartbeat: %+v, %v", l, err)
		}
		_, err = c.worker.Heartbeat(ctx, tk.TaskID, "w2", 1)
		if !client.IsLeaseLost(err) {
			t.Fatalf("heartbeat of another worker: %v, want lease_lost", err)
		}
		done, err := c.worker.Complete(ctx, tk.TaskID, client.Result{WorkerID: "w1", Attempt: 1, Output: "id,score\nr" + string(rune('a'+i)) + ",1\n"})
		if err != nil || done.State != client.TaskCompleted {
			t.Fatalf("complete: %+v, %v", done, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.user.GetJob(ctx, j.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == client.JobCompleted {
			if !got.Final() || got.Progress != 1 || got.FinishedAt == nil || got.ResultSHA256 == "" {
				t.Fatalf("completed job %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s after 10s", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc, err := c.user.Result(ctx, j.JobID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(data) != "id,score\nra,1\nrb,1\n" {
		t.Fatalf("result %q, %v", data, err)
	}
	tasks, err := c.user.ListTasks(ctx, j.JobID, client.ListOptions{State: client.TaskCompleted})
	if err != nil || len(tasks.Tasks) != 2 || !tasks.Tasks[0].Final() || tasks.Tasks[0].LeaseOwner != "w1" {
		t.Fatalf("tasks: %+v, %v", tasks, err)
	}
	tk, err := c.user.GetTask(ctx, tasks.Tasks[1].TaskID)
	if err != nil || tk.State != client.TaskCompleted || tk.LeaseExpiresAt != nil || tk.CreatedAt.IsZero() {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	final, err := c.user.Cancel(ctx, j.JobID)
	if err != nil || final.Status != client.JobCompleted {
		t.Fatalf("cancel of a completed job: %+v, %v; want it unchanged", final, err)
	}
}

func TestBatchFormsAndFailure(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	j, err := c.user.CreateJob(ctx, &client.JobRequest{Workload: "w", TopK: 1, MaxAttempts: 2, Input: client.JobInput{Chunks: chunks(3)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.worker.ClaimMany(ctx, client.ClaimRequest{WorkerID: "w1"}, 5)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("claim many: %d tasks, %v", len(tasks), err)
	}
	for _, tk := range tasks {
		if tk.LeaseDeadline.IsZero() {
			t.Fatalf("task %s has no lease deadline", tk.TaskID)
		}
	}
	st, err := c.worker.CompleteMany(ctx, []client.Result{
		{TaskID: tasks[0].TaskID, WorkerID: "w1", Attempt: 1, Output: "id,score\na,1\n"},
		{TaskID: tasks[1].TaskID, WorkerID: "w1", Attempt: 7, Output: "id,score\nb,1\n"},
		{TaskID: tasks[1].TaskID, WorkerID: "w1", Attempt: 1, Output: "id,value\nb,1\n"},
	})
	if err != nil || len(st) != 3 {
		t.Fatalf("complete many: %+v, %v", st, err)
	}
	if st[0].Status != 200 || st[0].Err != nil {
		t.Errorf("item 0: %+v", st[0])
	}
	if st[1].Status != 409 || !client.IsLeaseLost(st[1].Err) {
		t.Errorf("item 1: %+v, want 409 lease_lost", st[1])
	}
	if st[2].Status != 400 || st[2].Err == nil || st[2].Err.Code != client.CodeInvalidArgument {
		t.Errorf("item 2: %+v, want 400 invalid_argument", st[2])
	}
	tk, err := c.worker.Fail(ctx, tasks[1].TaskID, client.Failure{WorkerID: "w1", Attempt: 1, Error: "boom", Retryable: true})
	if err != nil || tk.State != client.TaskPending || tk.Error != "boom" {
		t.Fatalf("retryable failure: %+v, %v", tk, err)
	}
	tk, err = c.worker.Fail(ctx, tasks[2].TaskID, client.Failure{WorkerID: "w1", Attempt: 1, Error: "bad input", Retryable: false})
	if err != nil || tk.State != client.TaskFailed {
		t.Fatalf("failure for good: %+v, %v", tk, err)
	}
	got, err := c.user.GetJob(ctx, j.JobID)
	if err != nil || got.Status != client.JobFailed || !strings.Contains(got.Error, tasks[2].TaskID) {
		t.Fatalf("job after a failure for good: %+v, %v", got, err)
	}
	_, err = c.worker.Complete(ctx, tasks[1].TaskID, client.Result{WorkerID: "w1", Attempt: 1, Output: "id,score\nb,1\n"})
	if !client.IsCancelled(err) {
		t.Fatalf("result for a task of a failed job: %v, want cancelled", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()

	_, err := c.wrong.GetJob(ctx, "s0:x")
	e := wantCode(t, err, 401, client.CodeUnauthenticated)
	if !strings.Contains(e.Error(), "GET /jobs/s0:x: 401 unauthenticated: ") || client.IsRetryable(err) {
		t.Fatalf("error text %q (retryable %v)", e.Error(), client.IsRetryable(err))
	}
	_, err = c.missing.ListJobs(ctx, client.ListOptions{})
	wantCode(t, err, 401, client.CodeUnauthenticated)
	_, err = c.user.Claim(ctx, client.ClaimRequest{WorkerID: "w1"})
	wantCode(t, err, 403, client.CodePermissionDenied)
	_, err = c.user.GetJob(ctx, "s0:nosuch")
	wantCode(t, err, 404, client.CodeNotFound)
	if !client.IsNotFound(err) {
		t.Fatal("IsNotFound: false")
	}
	_, err = c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1", WaitSeconds: 61})
	wantCode(t, err, 400, client.CodeInvalidArgument)

	// A gateway's HTML error page.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	pc := client.New(proxy.URL, "t")
	defer pc.CloseIdleConnections()
	_, err = pc.GetJob(ctx, "x")
	e = wantCode(t, err, 502, client.CodeUnavailable)
	if !strings.Contains(e.Message, "502 Bad Gateway") || !client.IsRetryable(err) {
		t.Fatalf("gateway error %q, retryable %v", e.Message, client.IsRetryable(err))
	}

	// Nobody listens: retryable. A cancelled context: not.
	down := client.New("http://127.0.0.1:1", "t")
	_, err = down.GetJob(ctx, "x")
	if err == nil || !client.IsRetryable(err) || client.AsError(err) != nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable coordinator: %v (retryable %v)", err, client.IsRetryable(err))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.user.GetJob(cctx, "x")
	if !errors.Is(err, context.Canceled) || client.IsRetryable(err) {
		t.Fatalf("cancelled call: %v (retryable %v)", err, client.IsRetryable(err))
	}
	// The client's own timeout is the coordinator's fault: retryable.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	sc := client.New(slow.URL, "t", client.WithTimeout(100*time.Millisecond))
	defer sc.CloseIdleConnections()
	_, err = sc.GetJob(ctx, "x")
	if err == nil || !client.IsRetryable(err) {
		t.Fatalf("timed-out call: %v (retryable %v)", err, client.IsRetryable(err))
	}

	bad := client.New("localhost:8080", "t")
	if _, err := bad.GetJob(ctx, "x"); err == nil || !strings.Contains(err.Error(), "absolute http or https URL") {
		t.Fatalf("relative coordinator URL: %v", err)
	}
}

// TestInputToken checks that the worker token goes with a task's input
// only to the URL the coordinator issues for it: not to a data server, not
// to another path of the coordinator's host (another application behind
// the same proxy), not through a redirect out of the coordinator's base.
func TestInputToken(t *testing.T) {
	t.Parallel()
	type seen struct{ path, auth string }
	var (
		mu   sync.Mutex
		hits []seen
	)
	record := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, seen{r.Host + r.URL.Path, r.Header.Get("Authorization")})
		mu.Unlock()
	}
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(w, r)
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "id,x\n")
	}))
	defer data.Close()
	var coordURL string
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(w, r)
		switch r.URL.Path {
		case "/api/away", "/api/tasks/s0:a-1/input":
			http.Redirect(w, r, data.URL+"/moved.csv", http.StatusFound)
			return
		case "/api/tasks/s0:a-2/input":
			http.Redirect(w, r, coordURL+"/other/x.csv", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "id,x\n")
	}))
	defer coord.Close()
	coordURL = coord.URL
	c := client.New(coord.URL+"/api/", "secret")
	defer c.CloseIdleConnections()
	get := func(u string) {
		t.Helper()
		rc, err := c.Input(t.Context(), u)
		if err != nil {
			t.Fatalf("Input(%s): %v", u, err)
		}
		body, _ := io.ReadAll(rc)
		rc.Close()
		if string(body) != "id,x\n" {
			t.Fatalf("Input(%s) = %q", u, body)
		}
	}
	get(coord.URL + "/api/tasks/s0:a-0/input")
	get("/tasks/s0:a-0/input")
	get(data.URL + "/c0.csv")
	get(coord.URL + "/echo/x")
	get(coord.URL + "/api/away")
	get(coord.URL + "/api/tasks/s0:a-1/input")
	get(coord.URL + "/api/tasks/s0:a-2/input")
	if _, err := c.Input(t.Context(), "file:///etc/passwd"); err == nil {
		t.Fatal("Input of a file URL: no error")
	}
	_, err := c.Input(t.Context(), data.URL+"/missing?sig=SECRET")
	if e := wantCode(t, err, 404, client.CodeNotFound); strings.Contains(e.Error(), "SECRET") {
		t.Fatalf("error %q shows the URL's query", e.Error())
	}

	coordHost := strings.TrimPrefix(coord.URL, "http://")
	dataHost := strings.TrimPrefix(data.URL, "http://")
	want := []seen{
		{coordHost + "/api/tasks/s0:a-0/input", "Bearer secret"},
		{coordHost + "/api/tasks/s0:a-0/input", "Bearer secret"},
		{dataHost + "/c0.csv", ""},
		{coordHost + "/echo/x", ""},
		{coordHost + "/api/away", ""},
		{dataHost + "/moved.csv", ""},
		{coordHost + "/api/tasks/s0:a-1/input", "Bearer secret"},
		{dataHost + "/moved.csv", ""},
		{coordHost + "/api/tasks/s0:a-2/input", "Bearer secret"},
		{coordHost + "/other/x.csv", ""},
		{dataHost + "/missing", ""},
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != len(want) {
		t.Fatalf("requests %+v, want %+v", hits, want)
	}
	for i := range want {
		if hits[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, hits[i], want[i])
		}
	}
}

// TestPlainHTTPWarning: a client that sends its token over plain http to
// an address of this machine that is not loopback warns once, however many
// calls it makes; one that sends none, or reaches the coordinator by
// loopback (127.0.0.1, localhost), says nothing.
func TestPlainHTTPWarning(t *testing.T) {
	t.Parallel()
	ip := testenv.NonLoopbackIP(t)
	remote := setupAt(t, net.JoinHostPort(ip, "0"))
	local := setup(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(local.url, "http://"))
	calls := func(base, token string) []string {
		t.Helper()
		var (
			mu   sync.Mutex
			msgs []string
		)
		c := client.New(base, token, client.WithWarn(func(msg string) {
			mu.Lock()
			msgs = append(msgs, msg)
			mu.Unlock()
		}))
		defer c.CloseIdleConnections()
		for range 3 {
			if _, err := c.ListJobs(t.Context(), client.ListOptions{}); token != "" && err != nil {
				t.Fatalf("list jobs at %s: %v", base, err)
			}
		}
		_, _ = c.GetJob(t.Context(), "s0:missing")
		mu.Lock()
		defer mu.Unlock()
		return msgs
	}
	msgs := calls(remote.url, "ctok")
	if len(msgs) != 1 || !strings.Contains(msgs[0], "sending the token over plain http to "+strings.TrimPrefix(remote.url, "http://")) ||
		!strings.Contains(msgs[0], "use https") {
		t.Errorf("4 calls over plain http to %s warned %q; want one warning naming the host and saying to use https", remote.url, msgs)
	}
	for base, token := range map[string]string{
		remote.url:                 "",
		local.url:                  "ctok",
		"http://localhost:" + port: "ctok",
	} {
		if msgs := calls(base, token); len(msgs) != 0 {
			t.Errorf("calls to %s with token %q warned %q; want nothing", base, token, msgs)
		}
	}
}

// TestUploadAndLogs exercises the upload and task log endpoints when the
// coordinator serves them.
func TestUploadAndLogs(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	up, err := c.user.Upload(ctx, strings.NewReader("id,value\na,1\nb,2\n"))
	if err != nil || up.Rows != 3 || up.Bytes == 0 || len(up.SHA256) != 64 || up.UploadID == "" {
		t.Fatalf("upload: %+v, %v", up, err)
	}
	j, err := c.user.CreateJob(ctx, &client.JobRequest{Workload: "w", ChunkRows: 1, Input: client.JobInput{UploadID: up.UploadID}}, "")
	if err != nil || j.Tasks.Total != 2 {
		t.Fatalf("job over an upload: %+v, %v", j, err)
	}
	tk, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1"})
	if err != nil || tk == nil {
		t.Fatalf("claim: %v", err)
	}
	rc, err := c.worker.Input(ctx, tk.Input.URL)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	chunk, _ := io.ReadAll(rc)
	rc.Close()
	if string(chunk) != "id,value\na,1\n" {
		t.Fatalf("chunk %q", chunk)
	}
	err = c.worker.AppendLogs(ctx, tk.TaskID, client.LogLines{WorkerID: "w1", Attempt: 1, Lines: []string{"hello", "world"}})
	if err != nil {
		t.Fatalf("append logs: %v", err)
	}
	follow, err := c.user.Logs(ctx, tk.TaskID, true)
	if err != nil {
		t.Fatalf("follow logs: %v", err)
	}
	defer follow.Close()
	if _, err := c.worker.Complete(ctx, tk.TaskID, client.Result{WorkerID: "w1", Attempt: 1, Output: "id,score\na,1\n"}); err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(follow)
	if err != nil || !strings.Contains(string(text), "hello\nworld\n") {
		t.Fatalf("logs %q, %v", text, err)
	}
}

// TestWaitJobSeconds: the coordinator waits whole seconds, at most 60, so
// WaitJob rounds a wait up and caps it rather than send one it refuses.
func TestWaitJobSeconds(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Query().Get("wait_seconds"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"job_id":"j","status":"running"}`)
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t")
	defer c.CloseIdleConnections()
	for _, wait := range []time.Duration{90 * time.Second, 30 * time.Second, 500 * time.Millisecond, 0} {
		if _, err := c.WaitJob(t.Context(), "j", "tok", wait); err != nil {
			t.Fatalf("WaitJob(%v): %v", wait, err)
		}
	}
	if want := []string{"60", "30", "1", ""}; !slices.Equal(got, want) {
		t.Errorf("wait_seconds sent %q, want %q", got, want)
	}
}
