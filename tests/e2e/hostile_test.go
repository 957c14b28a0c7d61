package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
	"github.com/scimesh/scimesh/tests/framework/inprocess"
)

// hostileTokens are long enough not to be warned about, and all different.
var hostileTokens = auth.Tokens{
	Client: "client-token-0123456789abcdef",
	Worker: "worker-token-0123456789abcdef",
	Peer:   "peer-token-0123456789abcdef",
}

// hostileEnv gives a serve process the hostile suite's tokens.
var hostileEnv = []string{"WORKER_AUTH_TOKEN=" + hostileTokens.Worker, "CLIENT_AUTH_TOKEN=" + hostileTokens.Client, "PEER_AUTH_TOKEN=" + hostileTokens.Peer}

// restRoutes says who may call each REST route and the most its body
// may hold (SPEC §3, §7). Every route the server serves must be listed:
// a new route without an entry fails TestHostileCallers.
var restRoutes = map[string]struct {
	role auth.Role
	body int64 // 0: takes no body
}{
	"GET /health":                         {auth.Anyone, 0},
	"GET /ready":                          {auth.Anyone, 0},
	"GET /openapi.yaml":                   {auth.Anyone, 0},
	"GET /metrics":                        {auth.Anyone, 0},
	"POST /upload":                        {auth.Client, hostileUploadMax},
	"POST /jobs":                          {auth.Client, 256 << 20},
	"GET /jobs":                           {auth.Client, 0},
	"GET /jobs/{job_id}":                  {auth.Client, 0},
	"GET /jobs/{job_id}/tasks":            {auth.Client, 0},
	"GET /jobs/{job_id}/result":           {auth.Client, 0},
	"POST /jobs/{job_id}/cancel":          {auth.Client, 1 << 20},
	"POST /jobs/{job_id}/retry":           {auth.Client, 1 << 20},
	"GET /tasks/{task_id}":                {auth.Client, 0},
	"GET /tasks/{task_id}/logs":           {auth.Client, 0},
	"GET /account":                        {auth.Client, 0},
	"POST /accounts":                      {auth.Client, 64 << 10},
	"GET /accounts":                       {auth.Client, 0},
	"GET /accounts/{name}":                {auth.Client, 0},
	"PATCH /accounts/{name}":              {auth.Client, 64 << 10},
	"POST /accounts/{name}/tokens":        {auth.Client, 64 << 10},
	"GET /usage":                          {auth.Client, 0},
	"GET /audit":                          {auth.Client, 0},
	"GET /workloads":                      {auth.Client, 0},
	"GET /workers":                        {auth.Client, 0},
	"POST /worker-keys":                   {auth.Client, 64 << 10},
	"GET /worker-keys":                    {auth.Client, 0},
	"DELETE /worker-keys/{name}":          {auth.Client, 0},
	"PATCH /worker-keys/{account}/{name}": {auth.Client, 64 << 10},
	"POST /tasks/claim":                   {auth.Worker, 1 << 20},
	"POST /tasks/results":                 {auth.Worker, 256 << 20},
	"POST /tasks/{task_id}/heartbeat":     {auth.Worker, 1 << 20},
	"POST /tasks/{task_id}/result":        {auth.Worker, 256 << 20},
	"POST /tasks/{task_id}/failure":       {auth.Worker, 1 << 20},
	"GET /tasks/{task_id}/input":          {auth.Worker, 0},
	"POST /tasks/{task_id}/logs":          {auth.Worker, 16 << 20},
}

// hostileUploadMax is the upload bound of the hostile suite's server.
const hostileUploadMax = 1 << 20

// sendSlack is how much of a gigabyte past a route's bound the client
// sends before it waits for the answer: a server that read on would never
// answer, and the test would time out.
const sendSlack = 4 << 20

// rpcRoles says which token each service takes.
var rpcRoles = map[string]auth.Role{
	"scimesh.v1.Queue":    auth.Client,
	"scimesh.v1.Worker":   auth.Worker,
	"scimesh.v1.Internal": auth.Peer,
}

// hostile is a coordinator served in this process for the hostile suite.
type hostile struct {
	url     string
	engine  *engine.Engine
	blobDir string
	jobID   string // a job made before the attacks: nothing may change it
	taskID  string // its one chunk task
}

func startHostile(t *testing.T, cfg server.Config) *hostile {
	t.Helper()
	dir := t.TempDir()
	h := &hostile{blobDir: filepath.Join(dir, "blobs")}
	cfg.Addr, cfg.Shard, cfg.Tokens = "127.0.0.1:0", "s0", hostileTokens
	cfg.DB, cfg.DataDir = "sqlite:"+filepath.Join(dir, "scimesh.db"), dir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, _ := inprocess.Start(t, cfg)
	h.engine, h.url = srv.Engine(), srv.URL()
	var j jobOut
	if s := call(t, "POST", h.url+"/jobs", hostileTokens.Client, map[string]any{"workload": "w", "input": map[string]any{"chunks": chunkList(1)}}, &j); s != 201 {
		t.Fatalf("create the job: %d", s)
	}
	var tasks struct{ Tasks []taskOut }
	call(t, "GET", h.url+"/jobs/"+j.JobID+"/tasks", hostileTokens.Client, nil, &tasks)
	h.jobID, h.taskID = j.JobID, tasks.Tasks[0].TaskID
	return h
}

// unchanged checks that the attacks changed nothing: the one job and its
// task as they were made, no log line, no upload, no worker seen, no
// account but the built-in admin, as the migration made it.
func (h *hostile) unchanged(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	jobs, _, err := h.engine.ListJobs(ctx, engine.ListJobsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != h.jobID || jobs[0].Status != domain.JobPending {
		t.Errorf("jobs after the attacks: %d, first %+v; want only %s, pending", len(jobs), jobs[0].Job, h.jobID)
	}
	task, err := h.engine.GetTask(ctx, h.taskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != domain.TaskPending || task.Attempt != 0 {
		t.Errorf("task after the attacks: %s attempt %d, want pending attempt 0", task.State, task.Attempt)
	}
	logs, err := h.engine.ListLogs(ctx, h.taskID, 0, 10)
	if err != nil || len(logs.Lines) != 0 {
		t.Errorf("log after the attacks: %v %v, want none", logs, err)
	}
	accounts, err := h.engine.ListAccounts(ctx)
	if err != nil || len(accounts) != 1 || accounts[0].Name != domain.AdminAccount || accounts[0].Disabled || !accounts[0].UpdatedAt.Equal(accounts[0].CreatedAt) {
		t.Errorf("accounts after the attacks: %+v, %v; want the built-in admin alone, unchanged", accounts, err)
	}
	if keys, err := h.engine.ListWorkerKeys(ctx); err != nil || len(keys) != 0 {
		t.Errorf("worker keys after the attacks: %v, %v; want none", keys, err)
	}
	workers, _, err := h.engine.ListWorkers(ctx, engine.ListWorkersParams{Within: time.Hour})
	if err != nil || len(workers) != 0 {
		t.Errorf("workers after the attacks: %d %v, want none", len(workers), err)
	}
	var files []string
	_ = filepath.WalkDir(h.blobDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("files under the blob directory after the attacks: %v", files)
	}
}

// attempt is one hostile request.
type attempt struct {
	method, path, token, ctype string
	header                     http.Header
	body                       io.Reader
	length                     int64 // declared: -1 chunked; 0 with a body: its length
}

// answer is what came back.
type answer struct {
	status int
	header http.Header
	code   string // the REST error's code, or the Connect error's
	body   string
	took   time.Duration
}

var hostileClient = &http.Client{Timeout: 60 * time.Second}

func (h *hostile) send(t *testing.T, a attempt) answer {
	t.Helper()
	ans, err := h.try(a)
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// try is send for a goroutine of a test: it returns what went wrong.
func (h *hostile) try(a attempt) (answer, error) {
	req, err := http.NewRequest(a.method, h.url+a.path, a.body)
	if err != nil {
		return answer{}, err
	}
	if a.length != 0 {
		req.ContentLength = a.length
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.ctype != "" {
		req.Header.Set("Content-Type", a.ctype)
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	start := time.Now()
	if c, ok := a.body.(*testenv.Held); ok && c.Hold > 0 {
		defer c.Release()
	}
	resp, err := hostileClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", a.method, a.path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	ans := answer{status: resp.StatusCode, header: resp.Header, body: string(data), took: time.Since(start)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/connect+") && len(data) >= 5 {
		data = data[5:] // a Connect stream's end message, after its envelope's prefix
	}
	var e struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil {
		ans.code = e.Error.Code + e.Code
	}
	return ans, nil
}

// counting is a body of n bytes of b; past hold bytes (when set) it
// waits until released (testenv.Held).
func counting(b byte, n, hold int64) *testenv.Held {
	return &testenv.Held{R: io.LimitReader(testenv.Endless(b), n), Hold: hold}
}

// huge is a gigabyte of b that the server must answer before the client
// sends more than the bound and sendSlack.
func huge(b byte, bound int64) *testenv.Held {
	return counting(b, 1<<30, bound+sendSlack)
}

// trickle sends a few bytes, then one byte every 100 ms, until closed.
type trickle struct {
	sent int
	stop <-chan struct{}
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.sent > 0 {
		select {
		case <-r.stop:
			return 0, io.EOF
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.sent++
	p[0] = ' '
	return 1, nil
}

// roleToken is a token of another role than r (for 403s).
func otherToken(r auth.Role) string {
	if r == auth.Client {
		return hostileTokens.Worker
	}
	return hostileTokens.Client
}

func roleToken(r auth.Role) string {
	switch r {
	case auth.Client:
		return hostileTokens.Client
	case auth.Worker:
		return hostileTokens.Worker
	case auth.Peer:
		return hostileTokens.Peer
	}
	return ""
}

// TestHostileCallers sends, to every REST route and every RPC procedure
// of a coordinator with tokens, what a hostile or careless caller would:
// no token, a token of another role, a body over the route's bound
// (declared and not), a gzip bomb, a body that trickles in, a malformed
// body, a cross-site request. Each is answered as documented and quickly,
// and the database is as it was.
func TestHostileCallers(t *testing.T) {
	t.Parallel()
	h := startHostile(t, server.Config{MaxUploadBytes: hostileUploadMax, BodyGrace: 300 * time.Millisecond, BodyRate: 1 << 10})
	routes := httpapi.New(nil, auth.NewGate(auth.Tokens{}), nil, 0).Routes()
	for _, pattern := range routes {
		if pattern == "/ui/{page...}" {
			continue // the dashboard's routes: TestHostileDashboard
		}
		want, ok := restRoutes[pattern]
		if !ok {
			t.Errorf("route %q is not in restRoutes: say who may call it and how big its body may be", pattern)
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.NewReplacer("{job_id}", h.jobID, "{task_id}", h.taskID, "{name}", domain.AdminAccount, "{account}", domain.AdminAccount).Replace(path)
		t.Run(pattern, func(t *testing.T) {
			h.restRoute(t, method, path, want.role, want.body)
		})
	}
	for _, proc := range procedures() {
		svc := strings.Split(proc, "/")[1]
		t.Run(proc, func(t *testing.T) { h.rpcProcedure(t, proc, rpcRoles[svc]) })
	}
	t.Run("grpc", func(t *testing.T) { h.grpcProtocol(t) })
	h.unchanged(t)
}

// procedures lists the full names of every procedure of the scimesh.v1
// services, from their descriptors: a new one is attacked too.
func procedures() []string {
	var out []string
	for _, fd := range []protoreflect.FileDescriptor{v1.File_scimesh_v1_queue_proto, v1.File_scimesh_v1_worker_proto, v1.File_scimesh_v1_internal_proto} {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
	}
	return out
}

func (h *hostile) restRoute(t *testing.T, method, path string, role auth.Role, bound int64) {
	json := "application/json"
	if strings.HasSuffix(path, "/upload") {
		json = "text/csv"
	}
	expect := func(what string, a answer, status int, code string) {
		t.Helper()
		if a.status != status || code != "" && a.code != code {
			t.Errorf("%s: %d %s (%s), want %d %s", what, a.status, a.code, strings.TrimSpace(a.body), status, code)
		}
	}
	if role != auth.Anyone {
		expect("no token", h.send(t, attempt{method: method, path: path}), 401, auth.CodeUnauthenticated)
		expect("unknown token", h.send(t, attempt{method: method, path: path, token: "not-a-token-of-this-server"}), 401, auth.CodeUnauthenticated)
		expect("another role's token", h.send(t, attempt{method: method, path: path, token: otherToken(role)}), 403, auth.CodePermissionDenied)
		expect("the peer token", h.send(t, attempt{method: method, path: path, token: hostileTokens.Peer}), 403, auth.CodePermissionDenied)
		// Unauthenticated, a declared gigabyte is refused before a byte of it is read.
		expect("no token, 1 GiB body", h.send(t, attempt{method: method, path: path, body: huge('{', 0), length: 1 << 30, ctype: json}), 401, auth.CodeUnauthenticated)
	}
	tok := roleToken(role)
	if method == "POST" {
		expect("cross-site", h.send(t, attempt{method: method, path: path, token: tok, ctype: json, body: strings.NewReader("{}"),
			header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}), 403, auth.CodePermissionDenied)
	}

	// Over the bound, declared: refused before the body is read.
	body := counting(' ', bound+1, sendSlack)
	expect("declared body over the bound", h.send(t, attempt{method: method, path: path, token: tok, body: body, length: bound + 1, ctype: json}), 413, auth.CodeTooLarge)
	var a answer
	if method != "POST" {
		return
	}
	// Over the bound, not declared: cut at the bound. (The 256 MiB bounds
	// are checked declared only: reading them to the bound takes long.)
	fill := byte(' ')
	if json == "text/csv" {
		fill = '\n'
	}
	if bound <= 16<<20 {
		expect("chunked gigabyte", h.send(t, attempt{method: method, path: path, token: tok, body: huge(fill, bound), length: -1, ctype: json}), 413, auth.CodeTooLarge)
	}
	// A body that trickles in is cut off.
	stop := make(chan struct{})
	a = h.send(t, attempt{method: method, path: path, token: tok, body: &trickle{stop: stop}, length: -1, ctype: json})
	close(stop)
	expect("trickled body", a, 400, auth.CodeInvalidArgument)
	if !strings.Contains(a.body, "too slowly") || a.took > 10*time.Second {
		t.Errorf("trickled body: answered after %v with %q, want a cut within seconds, saying it was too slow", a.took, a.body)
	}
	if json == "text/csv" {
		return
	}
	expect("malformed JSON", h.send(t, attempt{method: method, path: path, token: tok, ctype: json, body: strings.NewReader(`{"worker_id": `)}), 400, auth.CodeInvalidArgument)
	expect("not JSON", h.send(t, attempt{method: method, path: path, token: tok, ctype: "text/plain", body: strings.NewReader(`{}`)}), 400, auth.CodeInvalidArgument)
	expect("form post", h.send(t, attempt{method: method, path: path, token: tok, ctype: "application/x-www-form-urlencoded", body: strings.NewReader(`a=b`)}), 400, auth.CodeInvalidArgument)
}

// smallBomb is a gzip bomb of 32 MiB, made once.
var smallBomb = func() func(t *testing.T) []byte {
	var once sync.Once
	var b []byte
	return func(t *testing.T) []byte {
		once.Do(func() { b = gzipBomb(t, 32<<20) })
		return b
	}
}()

// gzipBomb returns n spaces (a multiple of 1 MiB), gzipped: one gzip
// member of 1 MiB, repeated, as gzip readers read members one after the
// other.
func gzipBomb(t *testing.T, n int64) []byte {
	t.Helper()
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	if _, err := io.Copy(zw, counting(' ', 1<<20, 0)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return bytes.Repeat(one.Bytes(), int(n>>20))
}

func (h *hostile) rpcProcedure(t *testing.T, proc string, role auth.Role) {
	// The Connect protocol's unary JSON form for unary procedures, its
	// streaming form for GetLogs (the gate answers before the protocol
	// matters, but the handler's own checks need the right one).
	ctype := "application/json"
	if strings.HasSuffix(proc, "/GetLogs") {
		ctype = "application/connect+json"
	}
	expect := func(what string, a answer, code connect.Code) {
		t.Helper()
		if a.code != code.String() {
			t.Errorf("%s: %d %s (%s), want %s", what, a.status, a.code, strings.TrimSpace(a.body), code)
		}
	}
	expect("no token", h.send(t, attempt{method: "POST", path: proc, ctype: ctype, body: strings.NewReader("{}")}), connect.CodeUnauthenticated)
	expect("another role's token", h.send(t, attempt{method: "POST", path: proc, token: otherToken(role), ctype: ctype, body: strings.NewReader("{}")}), connect.CodePermissionDenied)
	expect("no token, 1 GiB body", h.send(t, attempt{method: "POST", path: proc, ctype: ctype, body: huge(' ', 0), length: 1 << 30}), connect.CodeUnauthenticated)
	tok := roleToken(role)
	body := counting(' ', rpc.MaxMessageBytes+2<<10, sendSlack)
	expect("declared body over the bound", h.send(t, attempt{method: "POST", path: proc, token: tok, ctype: ctype, body: body, length: rpc.MaxMessageBytes + 2<<10}), connect.CodeResourceExhausted)
	if ctype != "application/json" {
		return
	}
	expect("chunked gigabyte", h.send(t, attempt{method: "POST", path: proc, token: tok, ctype: ctype, body: huge(' ', rpc.MaxMessageBytes), length: -1}), connect.CodeResourceExhausted)
	a := h.send(t, attempt{method: "POST", path: proc, token: tok, ctype: ctype, body: bytes.NewReader(smallBomb(t)),
		header: http.Header{"Content-Encoding": {"gzip"}}})
	expect("gzip bomb", a, connect.CodeResourceExhausted)
	expect("malformed JSON", h.send(t, attempt{method: "POST", path: proc, token: tok, ctype: ctype, body: strings.NewReader(`{"taskId": `)}), connect.CodeInvalidArgument)
	stop := make(chan struct{})
	a = h.send(t, attempt{method: "POST", path: proc, token: tok, ctype: ctype, body: &trickle{stop: stop}, length: -1})
	close(stop)
	if a.status == 200 || a.took > 10*time.Second || !strings.Contains(a.body, "too slowly") {
		t.Errorf("trickled body: %d after %v (%s), want a refusal within seconds, saying it was too slow", a.status, a.took, a.body)
	}
}

// grpcProtocol checks the gRPC protocol proper (HTTP/2, binary, status in
// trailers): no token, another role's, and a message over the bound; and
// gRPC-Web's refusals.
func (h *hostile) grpcProtocol(t *testing.T) {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	call := func(token string, msg *v1.SubmitTaskRequest) error {
		opts := []connect.ClientOption{connect.WithGRPC()}
		if token != "" {
			opts = append(opts, connect.WithInterceptors(rpc.Bearer(token)))
		}
		c := scimeshv1connect.NewInternalClient(hc, h.url, opts...)
		_, err := c.SubmitTask(t.Context(), connect.NewRequest(msg))
		return err
	}
	if err := call("", &v1.SubmitTaskRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("gRPC without a token: %v, want unauthenticated", err)
	}
	if err := call(hostileTokens.Worker, &v1.SubmitTaskRequest{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("gRPC with the worker token: %v, want permission_denied", err)
	}
	// gRPC-Web: the status in the answer's headers.
	for _, c := range []struct {
		token string
		want  string
	}{{"", "16"}, {hostileTokens.Client, "7"}} {
		a := h.send(t, attempt{method: "POST", path: "/scimesh.v1.Internal/SetCancel", token: c.token, ctype: "application/grpc-web+proto",
			body: bytes.NewReader([]byte{0, 0, 0, 0, 0})})
		if got := a.header.Get("Grpc-Status"); got != c.want {
			t.Errorf("gRPC-Web with token %q: grpc-status %q (%d %q), want %s", c.token, got, a.status, a.body, c.want)
		}
	}
	big := &v1.SubmitTaskRequest{Tasks: []*v1.PlacedTask{{TaskId: strings.Repeat("x", rpc.MaxMessageBytes)}}}
	var ce *connect.Error
	if err := call(hostileTokens.Peer, big); !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Errorf("gRPC message over the bound: %v, want resource_exhausted", err)
	}
}

// TestHostileDashboard: the dashboard's routes admit only a session (or
// a client's token), refuse another role's token as such (403), bound
// their forms and refuse cross-site posts.
func TestHostileDashboard(t *testing.T) {
	t.Parallel()
	h := startHostile(t, server.Config{MaxUploadBytes: hostileUploadMax})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path, token string
		header              http.Header
		body                string
		length              int64
		want                int
	}{
		{"GET", "/ui/jobs", "", nil, "", 0, http.StatusSeeOther},
		{"GET", "/ui/jobs", hostileTokens.Worker, nil, "", 0, http.StatusForbidden},
		{"GET", "/ui/jobs", "unknown-token", nil, "", 0, http.StatusSeeOther},
		{"GET", "/ui/jobs", hostileTokens.Client, nil, "", 0, http.StatusOK},
		{"GET", "/ui/jobs/" + h.jobID + "/events", "", nil, "", 0, http.StatusUnauthorized},
		{"GET", "/ui/tasks/" + h.taskID + "/log", "", nil, "", 0, http.StatusUnauthorized},
		{"POST", "/ui/jobs/" + h.jobID + "/cancel", "", nil, "", 0, http.StatusUnauthorized},
		{"POST", "/ui/jobs/" + h.jobID + "/cancel", hostileTokens.Worker, nil, "", 0, http.StatusForbidden},
		{"POST", "/ui/jobs/" + h.jobID + "/cancel", "unknown-token", nil, "", 0, http.StatusUnauthorized},
		{"POST", "/ui/login", "", http.Header{"Sec-Fetch-Site": {"cross-site"}}, "token=" + hostileTokens.Client, 0, http.StatusForbidden},
		{"POST", "/ui/login", "", nil, strings.Repeat("a", 64<<10+1), 0, http.StatusRequestEntityTooLarge},
		{"POST", "/ui/login", "", nil, "", 1 << 30, http.StatusRequestEntityTooLarge},
		{"GET", "/ui/login", "", nil, "", 0, http.StatusOK},
		{"GET", "/ui/accounts", hostileTokens.Client, nil, "", 0, http.StatusOK},
		{"POST", "/ui/accounts", "", nil, "name=mallory&admin=on", 0, http.StatusUnauthorized},
		{"POST", "/ui/accounts", hostileTokens.Worker, nil, "name=mallory&admin=on", 0, http.StatusForbidden},
		{"POST", "/ui/accounts", hostileTokens.Client, nil, "", 1 << 30, http.StatusRequestEntityTooLarge},
		{"POST", "/ui/accounts/admin/disable", hostileTokens.Client, http.Header{"Sec-Fetch-Site": {"cross-site"}}, "", 0, http.StatusForbidden},
		{"GET", "/ui/jobs/new", "", nil, "", 0, http.StatusSeeOther},
		{"GET", "/ui/jobs/new", hostileTokens.Worker, nil, "", 0, http.StatusForbidden},
		{"POST", "/ui/jobs/new", "", nil, "workload=w&upload_id=s0:u1", 0, http.StatusUnauthorized},
		{"POST", "/ui/jobs/new", hostileTokens.Worker, nil, "workload=w&upload_id=s0:u1", 0, http.StatusForbidden},
		{"POST", "/ui/jobs/new", hostileTokens.Client, http.Header{"Sec-Fetch-Site": {"cross-site"}}, "workload=w&upload_id=s0:u1", 0, http.StatusForbidden},
		{"POST", "/ui/jobs/new", hostileTokens.Client, nil, "", 1 << 30, http.StatusRequestEntityTooLarge},
		{"POST", "/ui/upload", "", nil, "id,score\na,1\n", 0, http.StatusUnauthorized},
		{"POST", "/ui/upload", hostileTokens.Worker, nil, "id,score\na,1\n", 0, http.StatusForbidden},
		{"POST", "/ui/upload", hostileTokens.Client, http.Header{"Sec-Fetch-Site": {"cross-site"}}, "id,score\na,1\n", 0, http.StatusForbidden},
		{"POST", "/ui/upload", hostileTokens.Client, nil, "", hostileUploadMax + 1, http.StatusRequestEntityTooLarge},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		if c.length > 0 {
			body = counting('a', c.length, 0)
		}
		req, _ := http.NewRequest(c.method, h.url+c.path, body)
		if c.length > 0 {
			req.ContentLength = c.length
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, v := range c.header {
			req.Header[k] = v
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s (token %q, %d bytes): %d %q, want %d", c.method, c.path, c.token, len(c.body)+int(c.length), resp.StatusCode, data, c.want)
		}
	}
	h.unchanged(t)
}

// fmtBytes words a byte count for logs.
func fmtBytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestHostileMemory sends a real coordinator process a gigabyte three
// ways — with no token, with the right token but over the message bound,
// and as a gzip bomb that inflates to a gigabyte — and checks that each is
// refused as documented while the process's peak resident memory (VmHWM)
// stays under a bound far below the gigabyte. It logs the peaks and the
// time to each answer (docs/PERFORMANCE.md quotes them).
func TestHostileMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, hostileEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", dir)
	h := &hostile{url: p.URL}
	peak := func() int64 { return peakRSS(t, p.Cmd.Process.Pid) }
	// A caller without a token costs nothing: nothing of the body is read.
	// A caller with one may make the coordinator read and inflate up to
	// the 16 MiB bound of a message, which with the buffers' growth and
	// the garbage before a collection comes to about 130 MiB more. The
	// race detector multiplies the heap it shadows by about three.
	unauthBound, bound := int64(8<<20), int64(192<<20)
	if binary.Race {
		unauthBound, bound = 24<<20, 576<<20
	}
	const gig = 1 << 30
	bomb := gzipBomb(t, gig)
	const proc = "/scimesh.v1.Internal/SubmitTask"
	before := peak()
	for _, c := range []struct {
		name string
		a    attempt
		want connect.Code
	}{
		{"1 GiB without a token", attempt{method: "POST", path: proc, ctype: "application/json", body: huge(' ', 0), length: -1}, connect.CodeUnauthenticated},
		{"a gzip bomb of 1 GiB without a token", attempt{method: "POST", path: proc, ctype: "application/json",
			body: bytes.NewReader(bomb), header: http.Header{"Content-Encoding": {"gzip"}}}, connect.CodeUnauthenticated},
		{"1 GiB with the peer token", attempt{method: "POST", path: proc, token: hostileTokens.Peer, ctype: "application/json", body: huge(' ', rpc.MaxMessageBytes), length: -1}, connect.CodeResourceExhausted},
		{fmt.Sprintf("a gzip bomb of %s inflating to 1 GiB, with the peer token", fmtBytes(int64(len(bomb)))), attempt{method: "POST", path: proc, token: hostileTokens.Peer, ctype: "application/json",
			body: bytes.NewReader(bomb), header: http.Header{"Content-Encoding": {"gzip"}}}, connect.CodeResourceExhausted},
	} {
		a := h.send(t, c.a)
		if a.code != c.want.String() {
			t.Errorf("%s: %d %s, want %s", c.name, a.status, a.body, c.want)
		}
		hwm := peak()
		t.Logf("%s: %s in %v; peak RSS %s (%s before the first)", c.name, c.want, a.took.Round(time.Millisecond), fmtBytes(hwm), fmtBytes(before))
		switch {
		case c.want == connect.CodeUnauthenticated && hwm-before > unauthBound:
			t.Errorf("%s: the coordinator's peak RSS grew by %s, over the bound %s for a caller without a token", c.name, fmtBytes(hwm-before), fmtBytes(unauthBound))
		case hwm > bound:
			t.Errorf("%s: the coordinator's peak RSS reached %s, over the bound %s", c.name, fmtBytes(hwm), fmtBytes(bound))
		}
	}
}

// TestHostileCaps opens more long-polling claims and more log follows than
// the process's caps: the extra ones get 503 with Retry-After, over REST,
// RPC and the dashboard alike, and the others still work — new work wakes
// one waiting claim, a log line reaches every follower.
func TestHostileCaps(t *testing.T) {
	t.Parallel()
	h := startHostile(t, server.Config{MaxWaitingClaims: 3, MaxStreams: 2})
	busy := func(what string, a answer) {
		t.Helper()
		if a.status != http.StatusServiceUnavailable || a.code != "unavailable" || a.header.Get("Retry-After") == "" {
			t.Errorf("%s over the cap: %d %s (Retry-After %q), want 503 unavailable with Retry-After", what, a.status, a.body, a.header.Get("Retry-After"))
		}
	}
	claim := func(wait float64) answer {
		return h.send(t, attempt{method: "POST", path: "/tasks/claim", token: hostileTokens.Worker, ctype: "application/json",
			body: strings.NewReader(fmt.Sprintf(`{"worker_id": "w", "workloads": ["later"], "wait_seconds": %v}`, wait))})
	}

	// Three claims wait for work of a workload that has none yet.
	answers := make(chan answer, 3)
	for range 3 {
		go func() { answers <- claim(4) }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := h.engine.CountWaiting(); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the three claims are not waiting after 10 s")
		}
	}
	busy("a fourth waiting claim", claim(1))
	if s := claim(0); s.status != http.StatusNoContent {
		t.Errorf("a claim that does not wait, beside the full waiting room: %d %s, want 204", s.status, s.body)
	}
	busy("Worker.Poll", h.send(t, attempt{method: "POST", path: "/scimesh.v1.Worker/Poll", token: hostileTokens.Worker, ctype: "application/json",
		body: strings.NewReader(`{"workerId": "w", "waitSeconds": 1}`)}))
	// One task of that workload: one waiting claim gets it at once, the
	// others wait on.
	created := time.Now()
	var j jobOut
	if s := call(t, "POST", h.url+"/jobs", hostileTokens.Client, map[string]any{"workload": "later", "input": map[string]any{"chunks": chunkList(1)}}, &j); s != 201 {
		t.Fatalf("create a job: %d", s)
	}
	got := map[int]int{}
	for range 3 {
		a := <-answers
		got[a.status]++
		if a.status == http.StatusOK && time.Since(created) > 2*time.Second {
			t.Errorf("the woken claim answered %v after the job was made", time.Since(created))
		}
	}
	if got[http.StatusOK] != 1 || got[http.StatusNoContent] != 2 {
		t.Errorf("three waiting claims, one new task: answers %v, want one 200 and two 204", got)
	}

	// Two follows of a leased task's log fill the streams.
	var tk taskOut
	if s := call(t, "POST", h.url+"/tasks/claim", hostileTokens.Worker, map[string]any{"worker_id": "w1", "workloads": []string{"w"}}, &tk); s != 200 {
		t.Fatalf("claim the first job's task: %d", s)
	}
	lines := make(chan string, 2)
	for range 2 {
		req, _ := http.NewRequest("GET", h.url+"/tasks/"+tk.TaskID+"/logs?follow=1", nil)
		req.Header.Set("Authorization", "Bearer "+hostileTokens.Client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("follow: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		go func() {
			b := make([]byte, 256)
			n, _ := resp.Body.Read(b)
			lines <- string(b[:n])
		}()
	}
	busy("a third follow", h.send(t, attempt{method: "GET", path: "/tasks/" + tk.TaskID + "/logs?follow=1", token: hostileTokens.Client}))
	// A Connect stream's error comes in its last message, after a 200.
	if a := h.send(t, attempt{method: "POST", path: "/scimesh.v1.Queue/GetLogs", token: hostileTokens.Client, ctype: "application/connect+json",
		body: bytes.NewReader(connectEnvelope(`{"taskId": "` + tk.TaskID + `", "follow": true}`))}); a.code != "unavailable" {
		t.Errorf("GetLogs with follow over the cap: %d %s, want unavailable", a.status, a.body)
	}
	if a := h.send(t, attempt{method: "GET", path: "/ui/jobs/" + h.jobID + "/events", token: hostileTokens.Client}); a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Errorf("the dashboard's live view over the cap: %d %s, want 503 with Retry-After", a.status, a.body)
	}
	if s := call(t, "POST", h.url+"/tasks/"+tk.TaskID+"/logs", hostileTokens.Worker, map[string]any{"worker_id": "w1", "attempt": tk.Attempt, "lines": []string{"hello followers"}}, nil); s != 204 {
		t.Fatalf("append a log line: %d", s)
	}
	for range 2 {
		select {
		case l := <-lines:
			if !strings.Contains(l, "hello followers") {
				t.Errorf("a follower read %q, want the new line", l)
			}
		case <-time.After(5 * time.Second):
			t.Error("a follower did not get the new line within 5 s")
		}
	}
}

// connectEnvelope frames one message of the Connect streaming protocol.
func connectEnvelope(msg string) []byte {
	b := []byte{0, 0, 0, 0, 0}
	n := len(msg)
	b[1], b[2], b[3], b[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return append(b, msg...)
}

// TestHostileAnonymousBombs sends 300 gzip bombs at once, each inflating
// to 16 MiB, to the one RPC a caller without a token may make, the health
// check, and checks that every one is refused and that the coordinator
// process's peak resident memory grows by less than 64 MiB: a route that
// needs no token reads a few KiB of a message at most.
func TestHostileAnonymousBombs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, hostileEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", dir)
	h := &hostile{url: p.URL}
	// A healthy check first, so that what the first answer costs is in
	// the baseline.
	if a := h.send(t, attempt{method: "POST", path: "/grpc.health.v1.Health/Check", ctype: "application/json", body: strings.NewReader(`{}`)}); a.status != 200 {
		t.Fatalf("health check: %d %s", a.status, a.body)
	}
	before := peakRSS(t, p.Cmd.Process.Pid)
	bomb := gzipBomb(t, rpc.MaxMessageBytes)
	const bombs = 300
	answers, errs := make([]answer, bombs), make([]error, bombs)
	var wg sync.WaitGroup
	for i := range bombs {
		wg.Go(func() {
			answers[i], errs[i] = h.try(attempt{method: "POST", path: "/grpc.health.v1.Health/Check", ctype: "application/json",
				body: bytes.NewReader(bomb), header: http.Header{"Content-Encoding": {"gzip"}}})
		})
	}
	wg.Wait()
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("bomb %d: %v", i, errs[i])
		}
		if a.code != connect.CodeResourceExhausted.String() {
			t.Fatalf("bomb %d: %d %s, want resource_exhausted", i, a.status, a.body)
		}
	}
	grown := peakRSS(t, p.Cmd.Process.Pid) - before
	t.Logf("%d gzip bombs of %d bytes inflating to %s each, without a token: peak RSS grew by %s", bombs, len(bomb), fmtBytes(rpc.MaxMessageBytes), fmtBytes(grown))
	if grown > 64<<20 {
		t.Errorf("the coordinator's peak RSS grew by %s, over 64 MiB, for callers without a token", fmtBytes(grown))
	}
}

// peakRSS is a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the peak memory of process %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
