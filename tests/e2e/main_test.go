package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/s3test"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// scimesh is the scimesh binary built once for the end-to-end tests.
var scimesh string

// benchBinary is scimesh-bench, built beside it.
var benchBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scimesh-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scimesh, benchBinary = filepath.Join(dir, "scimesh"), filepath.Join(dir, "scimesh-bench")
	if err := binary.Build(scimesh, "cmd/scimesh", binary.Race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := binary.Build(benchBinary, "cmd/scimesh-bench", false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := s3test.Run(s3test.RunFunc(func() int { return pgtest.Run(m) }))
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running scimesh process.
type proc = binary.Proc

// onEachStore runs body as two parallel subtests, on SQLite and on
// PostgreSQL.
func onEachStore(t *testing.T, body func(t *testing.T, pg bool)) {
	t.Helper()
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body(t, pg)
		})
	}
}

// newDB returns the URL of a new database: a SQLite file in dir, or with
// pg a migrated PostgreSQL database of its own.
func newDB(t *testing.T, dir string, pg bool) string {
	t.Helper()
	if pg {
		return pgtest.URL(t)
	}
	return "sqlite:" + filepath.Join(dir, "scimesh.db")
}

// start runs `scimesh args…` in dir with env added to a clean environment.
func start(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	return binary.Start(t, scimesh, dir, env, args...)
}

// serveProc starts a coordinator on a free port and waits until it is ready.
func serveProc(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	return serveOn(t, dir, "127.0.0.1:0", env, args...)
}

// serveSQLite starts serve with the test tokens on a SQLite database and a
// data directory of their own in dir.
func serveSQLite(t *testing.T, dir string) *proc {
	t.Helper()
	return serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
}

// readyClient probes readiness; an address that accepts connections but
// never answers must not hang the test.
var readyClient = &http.Client{Timeout: 5 * time.Second}

// serveOn starts a coordinator on addr and waits until it is ready. With
// port 0 the kernel picks a free port, which the coordinator logs: unlike a
// port chosen beforehand, no test running alongside can take it meanwhile.
func serveOn(t *testing.T, dir, addr string, env []string, args ...string) *proc {
	t.Helper()
	return serveWith(t, readyClient, dir, addr, env, args...)
}

// serveWith is serveOn asking whether the coordinator is ready with hc,
// such as a client that trusts the authority of its TLS certificate.
func serveWith(t *testing.T, hc *http.Client, dir, addr string, env []string, args ...string) *proc {
	t.Helper()
	return binary.Serve(t, hc, scimesh, dir, addr, env, args...)
}

// run runs `scimesh args…` to the end and returns its combined output.
func run(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	return binary.Run(t.Context(), scimesh, dir, env, args...)
}

// call sends a JSON request and decodes a JSON answer into out (when not
// nil); a request that gets no answer fails the test. Call it from the
// test's goroutine; other goroutines use send.
func call(t *testing.T, method, url, token string, body any, out any) int {
	t.Helper()
	status, err := send(method, url, token, body, out)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// send is call for any goroutine: it returns what went wrong.
func send(method, url, token string, body any, out any) (int, error) {
	return sendWith(http.DefaultClient, method, url, token, body, out)
}

// sendWith is send through client: one with a timeout turns a request
// that never gets an answer into an error instead of a hung test.
func sendWith(client *http.Client, method, url, token string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %q: %w", method, url, data, err)
		}
	}
	return resp.StatusCode, nil
}

func chunkList(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"uri": fmt.Sprintf("https://data.example.org/%d.csv", i), "sha256": strings.Repeat("ab", 32)}
	}
	return out
}

type jobOut struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
}

type taskOut struct {
	TaskID      string `json:"task_id"`
	JobID       string `json:"job_id"`
	ChunkIndex  int    `json:"chunk_index"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	LeaseOwner  string `json:"lease_owner"`
	Error       string `json:"error"`
}

var tokenEnv = []string{"WORKER_AUTH_TOKEN=wtok", "CLIENT_AUTH_TOKEN=ctok"}

// TestServeSurvivesKill runs a job part way on SQLite, kills the coordinator
// with SIGKILL, restarts it and finishes the job: nothing accepted is lost,
// and the lease held across the restart is still the worker's.
func TestServeSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "data", "scimesh.db")
	p := serveProc(t, dir, tokenEnv, "--db", db)
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "w", "top_k": 1, "input": map[string]any{"chunks": chunkList(2)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var t0, t1 taskOut
	call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &t0)
	if s := call(t, "POST", p.URL+"/tasks/"+t0.TaskID+"/result", "wtok", map[string]any{"worker_id": "w1", "attempt": 1, "output": "id,score\na,1\n"}, nil); s != 200 {
		t.Fatalf("result: %d", s)
	}
	call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &t1)

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done
	p.Done <- nil
	p = serveProc(t, dir, tokenEnv, "--db", db)

	if s := call(t, "POST", p.URL+"/tasks/"+t1.TaskID+"/heartbeat", "wtok", map[string]any{"worker_id": "w1", "attempt": 1}, nil); s != 200 {
		t.Fatalf("heartbeat of a lease held across the restart: %d", s)
	}
	if s := call(t, "POST", p.URL+"/tasks/"+t1.TaskID+"/result", "wtok", map[string]any{"worker_id": "w1", "attempt": 1, "output": "id,score\nb,2\n"}, nil); s != 200 {
		t.Fatalf("result after restart: %d", s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got jobOut
		call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		if got.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s after restart, want completed", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.NewRequest("GET", p.URL+"/jobs/"+j.JobID+"/result", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer ctok")
	r, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if string(body) != "id,score\nb,2\n" {
		t.Fatalf("result %q", body)
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := run(t, dir, []string{"WORKER_AUTH_TOKEN=only-one"}, "serve", "--addr", "0.0.0.0:0", "--db", "sqlite:"+filepath.Join(dir, "db"))
	if err == nil || !strings.Contains(out, "refusing to listen on 0.0.0.0:0 without tokens") || !strings.Contains(out, "CLIENT_AUTH_TOKEN") {
		t.Fatalf("serve on 0.0.0.0 without tokens: err %v, output:\n%s", err, out)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "db")); statErr == nil {
		t.Fatal("the refused serve created its database")
	}
	// With a topology, the peers' service needs its token too.
	out, err = run(t, dir, tokenEnv, "serve", "--addr", "0.0.0.0:0", "--db", "sqlite:"+filepath.Join(dir, "db"),
		"--topology", "static:s1=http://h1:8080")
	if err == nil || !strings.Contains(out, "without PEER_AUTH_TOKEN") {
		t.Fatalf("serve on 0.0.0.0 with a topology and no peer token: err %v, output:\n%s", err, out)
	}
	// Two roles with one token: either could act as the other.
	out, err = run(t, dir, []string{"WORKER_AUTH_TOKEN=same-token-0123456789", "CLIENT_AUTH_TOKEN=same-token-0123456789"},
		"serve", "--db", "sqlite:"+filepath.Join(dir, "same.db"))
	if err == nil || !strings.Contains(out, "CLIENT_AUTH_TOKEN and WORKER_AUTH_TOKEN are the same token") {
		t.Fatalf("serve with equal tokens: err %v, output:\n%s", err, out)
	}
	// An empty data directory would leave nowhere for uploads.
	out, err = run(t, dir, tokenEnv, "serve", "--data-dir", "", "--db", "sqlite:"+filepath.Join(dir, "nodata.db"))
	if err == nil || !strings.Contains(out, "--data-dir is empty") {
		t.Fatalf("serve with an empty --data-dir: err %v, output:\n%s", err, out)
	}
	// Without a topology it starts, and its peers' service admits no one;
	// on loopback too, once it checks other tokens.
	for _, addr := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
		p := serveOn(t, dir, addr, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "open.db"))
		for _, token := range []string{"", "ctok", "anything"} {
			in := scimeshv1connect.NewInternalClient(http.DefaultClient, p.URL, withToken(token))
			_, err := in.SetCancel(t.Context(), connect.NewRequest(&v1.SetCancelRequest{TaskId: "s0:x"}))
			if code := connect.CodeOf(err); code != connect.CodeUnauthenticated && code != connect.CodePermissionDenied {
				t.Errorf("Internal call with token %q on %s without a peer token: %v, want refused", token, addr, err)
			}
		}
		_ = p.Cmd.Process.Kill()
		// Short tokens are warned about, in one line naming them.
		if n := strings.Count(p.Stderr.String(), "weak tokens"); n != 1 || !strings.Contains(p.Stderr.String(), "tokens=CLIENT_AUTH_TOKEN,WORKER_AUTH_TOKEN") {
			t.Errorf("serve with 4-byte tokens logged %d weak-token lines:\n%s", n, p.Stderr.String())
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "scimesh.db")
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SCIMESH_SHARD=fromfile\nCLIENT_AUTH_TOKEN=filetok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shardOf := func(env []string, args ...string) string {
		p := serveProc(t, dir, env, append([]string{"--db", db}, args...)...)
		var j jobOut
		tok := "filetok"
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "CLIENT_AUTH_TOKEN="); ok {
				tok = v
			}
		}
		if s := call(t, "POST", p.URL+"/jobs", tok, map[string]any{"workload": "w", "input": map[string]any{"chunks": chunkList(1)}}, &j); s != 201 {
			t.Fatalf("create job: %d", s)
		}
		_ = p.Cmd.Process.Kill()
		shard, _, _ := strings.Cut(j.JobID, ":")
		return shard
	}
	if got := shardOf(nil); got != "fromfile" {
		t.Errorf(".env alone: shard %q, want fromfile", got)
	}
	if got := shardOf([]string{"SCIMESH_SHARD=fromenv", "CLIENT_AUTH_TOKEN=envtok"}); got != "fromenv" {
		t.Errorf("environment over .env: shard %q, want fromenv", got)
	}
	if got := shardOf([]string{"SCIMESH_SHARD=fromenv"}, "--shard", "fromflag"); got != "fromflag" {
		t.Errorf("flag over environment: shard %q, want fromflag", got)
	}
	other := filepath.Join(dir, "other.env")
	if err := os.WriteFile(other, []byte("SCIMESH_SHARD=fromother\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shardOf([]string{"ENV_FILE=" + other, "CLIENT_AUTH_TOKEN=x"}); got != "fromother" {
		t.Errorf("ENV_FILE: shard %q, want fromother", got)
	}
	out, err := run(t, dir, nil, "serve", "--shard", "Bad_Shard", "--db", db)
	if err == nil || !strings.Contains(out, "shard name") {
		t.Errorf("bad shard accepted: %v %s", err, out)
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		db := newDB(t, dir, pg)
		if pg {
			// pgtest migrates; start from an empty schema.
			for i := 0; ; i++ {
				out, err := run(t, dir, nil, "migrate", "down", "--db", db)
				if err != nil {
					t.Fatalf("migrate down: %v\n%s", err, out)
				}
				if strings.Contains(out, "nothing to revert") {
					break
				}
				if i > 100 {
					t.Fatalf("migrate down still reverts after %d calls:\n%s", i+1, out)
				}
			}
		}
		ms, err := sqlite.Migrations()
		if pg {
			ms, err = postgres.Migrations()
		}
		if err != nil || len(ms) < 2 {
			t.Fatalf("migrations: %d, %v", len(ms), err)
		}
		// status lists every migration, each applied (up to n) or pending.
		status := func(n int) string {
			var b strings.Builder
			for i, m := range ms {
				state := "pending"
				if i < n {
					state = "applied"
				}
				fmt.Fprintf(&b, "%04d_%s\t%s\n", m.Version, m.Name, state)
			}
			return b.String()
		}
		var applied strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&applied, "applied %04d\n", m.Version)
		}
		last := len(ms) - 1
		steps := []struct {
			args []string
			want string
		}{
			{[]string{"migrate", "status"}, status(0)},
			{[]string{"migrate", "up"}, applied.String()},
			{[]string{"migrate", "status"}, status(len(ms))},
			{[]string{"migrate", "up"}, "nothing to apply"},
			{[]string{"migrate", "down"}, fmt.Sprintf("reverted %04d", ms[last].Version)},
			{[]string{"migrate", "status"}, status(last)},
		}
		for _, s := range steps {
			out, err := run(t, dir, []string{"DATABASE_URL=" + db}, s.args...)
			if err != nil || !strings.Contains(out, s.want) {
				t.Fatalf("scimesh %v: %v, output %q, want %q", s.args, err, out, s.want)
			}
		}
		for i := last - 1; i >= 0; i-- {
			want := fmt.Sprintf("reverted %04d", ms[i].Version)
			if out, err := run(t, dir, []string{"DATABASE_URL=" + db}, "migrate", "down"); err != nil || !strings.Contains(out, want) {
				t.Fatalf("migrate down: %v, output %q, want %q", err, out, want)
			}
		}
		if out, err := run(t, dir, []string{"DATABASE_URL=" + db}, "migrate", "down"); err != nil || !strings.Contains(out, "nothing to revert") {
			t.Fatalf("migrate down with nothing applied: %v, output %q", err, out)
		}
		if pg {
			out, err := run(t, dir, nil, "serve", "--db", db, "--addr", testenv.FreeAddr(t))
			if err == nil || !strings.Contains(out, "migrate up") {
				t.Fatalf("serve on an unmigrated PostgreSQL: %v\n%s", err, out)
			}
		}
		if out, err := run(t, dir, nil, "migrate", "sideways", "--db", db); err == nil || !strings.Contains(out, "up, down or status") {
			t.Fatalf("unknown action: %v %s", err, out)
		}
	})
}

// tryCall GETs url and decodes its JSON into out; it returns the status,
// or 0 when the server does not answer (while it restarts, say).
func tryCall(url, token string, out any) int {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return 0
	}
	return resp.StatusCode
}

// runStdout runs `scimesh args…` to the end and returns its standard
// output; its standard error comes with a failure.
func runStdout(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	return binary.Output(t.Context(), scimesh, dir, env, args...)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestOpenServerAnswersLoopbackNamesOnly: a coordinator without tokens
// refuses requests addressed to any other host name (DNS rebinding).
func TestOpenServerAnswersLoopbackNamesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, nil, "--db", "sqlite:"+filepath.Join(dir, "open.db"))
	for host, want := range map[string]int{"evil.example": 421, "evil.example:8080": 421, "10.1.2.3": 421,
		"localhost": 200, strings.TrimPrefix(p.URL, "http://"): 200, "[::1]:9": 200} {
		req, _ := http.NewRequest("GET", p.URL+"/jobs", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /jobs with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestServeLogLevel: --log-level quiets the request lines, and a level
// that does not exist is refused with the ones that do.
func TestServeLogLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveOn(t, dir, testenv.FreeAddr(t), tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "q.db"), "--log-level", "warn")
	if s := call(t, "GET", p.URL+"/jobs", "ctok", nil, nil); s != 200 {
		t.Fatalf("GET /jobs: %d", s)
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(p.Stderr.String(), "msg=request") {
		t.Fatalf("a request line was logged at --log-level warn:\n%s", p.Stderr.String())
	}
	out, err := run(t, dir, tokenEnv, "serve", "--db", "sqlite:"+filepath.Join(dir, "r.db"), "--log-level", "loud")
	if err == nil || !strings.Contains(out, "use debug, info, warn or error") {
		t.Fatalf("serve --log-level loud: %v\n%s", err, out)
	}
}
