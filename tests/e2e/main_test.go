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
	"sync"
	"testing"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/s3test"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// scimesh is the scimesh binary built once for the end-to-end tests.
var scimesh string

// binDir holds the binaries the tests build.
var binDir string

// benchBinary builds scimesh-bench into binDir, once, for the tests that
// run it.
var benchBinary = sync.OnceValues(func() (string, error) {
	path := filepath.Join(binDir, "scimesh-bench")
	return path, binary.Build(path, "cmd/scimesh-bench", false)
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scimesh-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir, scimesh = dir, filepath.Join(dir, "scimesh")
	if err := binary.Build(scimesh, "cmd/scimesh", binary.Race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := s3test.Run(s3test.RunFunc(func() int { return pgtest.Run(m) }))
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

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
func start(t *testing.T, dir string, env []string, args ...string) *binary.Proc {
	t.Helper()
	return binary.Start(t, scimesh, dir, env, args...)
}

// serveProc starts a coordinator on a free port and waits until it is ready.
func serveProc(t *testing.T, dir string, env []string, args ...string) *binary.Proc {
	t.Helper()
	return serveOn(t, dir, "127.0.0.1:0", env, args...)
}

// serveSQLite starts serve with the test tokens on a SQLite database and a
// data directory of their own in dir.
func serveSQLite(t *testing.T, dir string) *binary.Proc {
	t.Helper()
	return serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
}

// serveOn starts a coordinator on addr and waits until it is ready. With
// port 0 the kernel picks a free port, which the coordinator logs: unlike a
// port chosen beforehand, no test running alongside can take it meanwhile.
func serveOn(t *testing.T, dir, addr string, env []string, args ...string) *binary.Proc {
	t.Helper()
	return binary.Serve(t, binary.ReadyClient, scimesh, dir, addr, env, args...)
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
