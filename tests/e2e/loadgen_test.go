package e2e

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/tests/framework/binary"
)

// TestBenchCoordinator runs `scimesh-bench --coordinator` as a process of
// its own against a coordinator in another, with the tokens from the
// environment, over REST single and batch forms and gRPC: each run reports
// its lifecycles, and the coordinator counts every measured chunk task of
// the job completed and the backlog pending.
func TestBenchCoordinator(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bench, err := benchBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	seededRe := regexp.MustCompile(`seeded 220 pending (?:chunk tasks of job (\S+)|single-task trees) in `)
	for _, form := range [][]string{{"--batch", "1"}, {"--batch", "50"}, {"--protocol", "grpc"}} {
		args := append([]string{"--coordinator", p.URL, "--workers", "4", "--tasks", "200", "--backlog", "20"}, form...)
		out, err := binary.Run(t.Context(), bench, dir, tokenEnv, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", form, err, out)
		}
		m := seededRe.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, ": 200 lifecycles in ") || !strings.Contains(out, "; pending after 20\n") {
			t.Fatalf("%v printed\n%s", form, out)
		}
		if m[1] == "" {
			continue // gRPC: bench counted the trees itself, by Queue.Query
		}
		var job struct {
			Tasks struct{ Total, Pending, Leased, Completed int } `json:"tasks"`
		}
		if s := call(t, "GET", p.URL+"/jobs/"+m[1], "ctok", nil, &job); s != 200 {
			t.Fatalf("get job: %d", s)
		}
		if c := job.Tasks; c.Total != 220 || c.Completed != 200 || c.Pending != 20 || c.Leased != 0 {
			t.Errorf("%v: the job counts %+v; want 220 tasks, 200 completed, 20 pending", form, c)
		}
	}
}

// TestServePprof: --pprof serves the profiles on a loopback listener of
// its own, and refuses any other address before anything starts.
func TestServePprof(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "192.0.2.1:6060"} {
		out, err := run(t, dir, tokenEnv, "serve", "--pprof", addr, "--db", "sqlite:"+filepath.Join(dir, "refused.db"))
		if err == nil || !strings.Contains(out, "refusing --pprof "+addr) {
			t.Errorf("serve --pprof %s: err %v, output:\n%s", addr, err, out)
		}
	}
	p := serveProc(t, dir, tokenEnv, "--pprof", "127.0.0.1:0", "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	m := regexp.MustCompile(`msg="serving pprof" addr=(\S+)`).FindStringSubmatch(p.Stderr.String())
	if m == nil {
		t.Fatalf("no pprof address logged:\n%s", p.Stderr.String())
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + m[1] + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "serve") {
		t.Errorf("GET /debug/pprof/cmdline: %d %q", resp.StatusCode, b)
	}
	// Not to a page that rebound its own name to 127.0.0.1.
	req, _ := http.NewRequest("GET", "http://"+m[1]+"/debug/pprof/cmdline", nil)
	req.Host = "evil.example"
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(b), "serve") {
		t.Errorf("GET /debug/pprof/cmdline with Host evil.example: %d %q, want 421 and no command line", resp.StatusCode, b)
	}
	// Not on the API's port.
	if s := call(t, "GET", p.URL+"/debug/pprof/cmdline", "ctok", nil, nil); s != 404 {
		t.Errorf("GET /debug/pprof/cmdline on the API's port: %d, want 404", s)
	}
}
