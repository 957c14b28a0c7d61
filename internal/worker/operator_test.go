package worker_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// What a worker's operator controls: where hosted inputs come from, how
// big an input of unknown size may be, what commands see of the worker's
// environment, the work directory's leftovers, and the job's timeout.

// ref is a chunk reference to data at uri.
func ref(uri string, data []byte) client.ChunkRef {
	sum := sha256.Sum256(data)
	return client.ChunkRef{URI: uri, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(data))}
}

// countingServer serves data at every path on a listener of its own and
// counts the requests it gets.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(l net.Listener, data []byte) *countingServer {
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = w.Write(data)
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	return s
}

// TestHostedInputHosts checks --allow-input-host: loopback refused by
// default, for good and with a message that names the address and the
// flag; allowed by a CIDR; a redirect checked like the first URL.
func TestHostedInputHosts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	chunk := []byte("id,value\na,1\nb,2\n")
	noCache := false
	score := func(name string) []worker.Workload { return []worker.Workload{mustWorkload(t, name+"="+scoreCommand)} }
	workers := map[string]*running{
		"default": b.startWorker(worker.Config{AllowInputHosts: []string{}, Workloads: score("default")}), // no pattern: the default
		"cidr":    b.startWorker(worker.Config{AllowInputHosts: []string{"127.0.0.1/32"}, Workloads: score("cidr")}),
		"name":    b.startWorker(worker.Config{AllowInputHosts: []string{"localhost"}, Workloads: score("name")}),
		"both":    b.startWorker(worker.Config{AllowInputHosts: []string{"localhost", "127.0.0.2/32"}, Workloads: score("both")}),
	}

	// The task's error says the host is not allowed, and no more: the
	// address and the rule it broke are in the worker's log.
	failsForGood := func(t *testing.T, workload string, c client.ChunkRef, inLog ...string) {
		t.Helper()
		// The chunks' bytes are the same whatever their host: without
		// "cache": false, the cache would complete them from the first.
		j := b.createJob(client.JobRequest{Workload: workload, MaxAttempts: 3, TopK: 1, Cache: &noCache, Input: client.JobInput{Chunks: []client.ChunkRef{c}}})
		b.waitJob(j.JobID, client.JobFailed, 20*time.Second)
		tk := b.tasks(j.JobID)[0]
		if tk.Attempt != 1 {
			t.Errorf("task failed after %d attempts, want 1: a refused host is no reason to try again", tk.Attempt)
		}
		if !strings.Contains(tk.Error, "is not allowed by this worker's --allow-input-host rules") || strings.Contains(tk.Error, "127.0.0") {
			t.Errorf("task error %q; want it to say the host is not allowed, without its address", tk.Error)
		}
		for _, w := range inLog {
			workers[workload].waitLog(t, w, 5*time.Second)
		}
	}
	completes := func(t *testing.T, workload string, c client.ChunkRef) {
		t.Helper()
		j := b.createJob(client.JobRequest{Workload: workload, TopK: 1, Cache: &noCache, Input: client.JobInput{Chunks: []client.ChunkRef{c}}})
		b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
		if got := b.result(j.JobID); got != "id,score,chunk\nb,2,0\n" {
			t.Errorf("result %q", got)
		}
	}

	t.Run("loopback refused by default", func(t *testing.T) {
		c := b.data.host("/hosts/default", chunk, nil)
		failsForGood(t, "default", c, "127.0.0.1", "loopback", "--allow-input-host 127.0.0.1/32")
	})
	t.Run("allowed by a CIDR", func(t *testing.T) {
		completes(t, "cidr", b.data.host("/hosts/cidr", chunk, nil))
	})
	t.Run("allowed by name", func(t *testing.T) {
		c := b.data.host("/hosts/name", chunk, nil)
		c.URI = strings.Replace(c.URI, "127.0.0.1", "localhost", 1)
		completes(t, "name", c)
	})

	// A redirect from localhost (allowed by name) to 127.0.0.2, a
	// loopback address that only one worker allows.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no listener on 127.0.0.2 for the redirect cases: %v", err)
	}
	target := newCountingServer(l, chunk)
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	via := ref(strings.Replace(redirector.URL, "127.0.0.1", "localhost", 1)+"/c.csv", chunk)

	t.Run("redirect to a refused host", func(t *testing.T) {
		failsForGood(t, "name", via, "the input host 127.0.0.2 is not allowed", "matches none of this worker's --allow-input-host patterns (localhost)", "--allow-input-host 127.0.0.2/32")
		if n := target.hits.Load(); n != 0 {
			t.Errorf("the refused host got %d requests; the worker must not connect", n)
		}
	})
	t.Run("redirect to an allowed host", func(t *testing.T) {
		completes(t, "both", via)
		if target.hits.Load() == 0 {
			t.Error("the chunk did not come from the redirect's target")
		}
	})
	if auth := b.data.authHeaders(); strings.Join(auth, "") != "" {
		t.Errorf("hosted inputs were fetched with Authorization headers %q", auth)
	}
}

// TestHostedInputErrorsStayInLog fails hosted inputs in the ways that
// would tell a client about the worker's network — a closed port, a host
// the worker's rules refuse, a chunk whose sha256 or size is not the job's
// (to a command and to the built-in) — and checks that the task's error,
// as any client reads it, gives a plain reason with no address, no dial
// error and nothing of what came, while the worker's log has them.
func TestHostedInputErrorsStayInLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.startWorker(worker.Config{Concurrency: 4, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand), mustWorkload(t, "tanimoto")}})
	strict := b.startWorker(worker.Config{AllowInputHosts: []string{"10.0.0.0/8"}, Workloads: []worker.Workload{mustWorkload(t, "strict="+scoreCommand)}})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	chunk := []byte("id,value\na,1\n")
	served := []byte("id,value\na,2\n") // what the data server sends instead of chunk
	servedSum := sha256.Sum256(served)
	fps := []byte("id,fingerprint\na,ff\n")
	fpsServed := []byte("id,fingerprint\na,0f\n")
	fpsSum := sha256.Sum256(fpsServed)
	sha := b.data.host("/leak/sha", served, chunk)
	size := b.data.host("/leak/size", chunk, nil)
	size.Bytes = 20
	builtin := b.data.host("/leak/fps", fpsServed, fps)

	for _, c := range []struct {
		name, workload string
		ref            client.ChunkRef
		r              *running
		want           string   // the task's error ends so
		hidden         []string // not in the task's error, but in the worker's log
	}{
		{"closed port", "score", ref("http://"+closedAddr+"/c.csv", chunk), r,
			"download the input: the hosted input could not be fetched (the worker's log says why)", []string{closedAddr, "dial tcp " + closedAddr + ": connect: connection refused"}},
		{"refused host", "strict", ref("http://"+closedAddr+"/c.csv", chunk), strict,
			"download the input: the hosted input's host, or one it redirected to, is not allowed by this worker's --allow-input-host rules (the worker's log says which and why)",
			[]string{"127.0.0.1", "the input host 127.0.0.1 is not allowed: it matches none of this worker's --allow-input-host patterns (10.0.0.0/8)"}},
		{"sha256", "score", sha, r, "the hosted input's sha256 does not match the job's (the worker's log has what came)", []string{hex.EncodeToString(servedSum[:])}},
		{"size", "score", size, r, "the hosted input's size is not the bytes the job names (the worker's log has what came)", []string{"the input is 13 bytes; the task names 20"}},
		{"sha256 to the built-in", "tanimoto", builtin, r, "the hosted input's sha256 does not match the job's (the worker's log has what came)", []string{hex.EncodeToString(fpsSum[:])}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := b.createJob(client.JobRequest{Workload: c.workload, MaxAttempts: 1, Parameters: json.RawMessage(`{"query":"ff"}`),
				Input: client.JobInput{Chunks: []client.ChunkRef{c.ref}}})
			b.waitJob(j.JobID, client.JobFailed, 20*time.Second)
			tk, err := b.client.GetTask(t.Context(), b.tasks(j.JobID)[0].TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(tk.Error, c.want) {
				t.Errorf("the task's error is %q; want it to end %q", tk.Error, c.want)
			}
			for _, h := range c.hidden {
				if strings.Contains(tk.Error, h) {
					t.Errorf("the task's error %q tells a client %q", tk.Error, h)
				}
				c.r.waitLog(t, h, 5*time.Second)
			}
		})
	}
}

// TestMaxInputBytes checks that a chunk of unknown size is cut off at
// MaxInputBytes, failing its task for good with a message that names the
// flag; that a chunk whose task names a larger size fails so too, without
// a byte of it fetched; and that one below the bound runs.
func TestMaxInputBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(worker.Config{MaxInputBytes: 64, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})
	big := []byte("id,value\n" + strings.Repeat("row,1\n", 40)) // 249 bytes

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	declared := newCountingServer(l, big)
	t.Cleanup(declared.Close)
	j := b.createJob(client.JobRequest{Workload: "score", MaxAttempts: 3, Input: client.JobInput{Chunks: []client.ChunkRef{ref(declared.URL+"/big.csv", big)}}})
	b.waitJob(j.JobID, client.JobFailed, 20*time.Second)
	if tk := b.tasks(j.JobID)[0]; tk.Attempt != 1 || !strings.Contains(tk.Error, "the input is 249 bytes, more than the 64") || !strings.Contains(tk.Error, "--max-input-bytes") {
		t.Errorf("task that names a size over the bound: attempt %d, error %q; want a failure for good at attempt 1 naming the sizes and --max-input-bytes", tk.Attempt, tk.Error)
	}
	if n := declared.hits.Load(); n != 0 {
		t.Errorf("the chunk whose task names a size over the bound was requested %d times; want none", n)
	}

	c := b.data.host("/max/big", big, nil)
	c.Bytes = 0
	j = b.createJob(client.JobRequest{Workload: "score", MaxAttempts: 3, Input: client.JobInput{Chunks: []client.ChunkRef{c}}})
	b.waitJob(j.JobID, client.JobFailed, 20*time.Second)
	tk := b.tasks(j.JobID)[0]
	if tk.Attempt != 1 || !strings.Contains(tk.Error, "larger than 64 bytes") || !strings.Contains(tk.Error, "--max-input-bytes") {
		t.Fatalf("task over the bound: attempt %d, error %q; want a failure for good at attempt 1 naming the bound and --max-input-bytes", tk.Attempt, tk.Error)
	}

	small := b.data.host("/max/small", []byte("id,value\na,1\n"), nil)
	small.Bytes = 0
	j = b.createJob(client.JobRequest{Workload: "score", Input: client.JobInput{Chunks: []client.ChunkRef{small}}})
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
}

// TestEnvironmentAllowlist checks that a command sees only the allowed
// variables of the worker's environment, those PassEnv names, and the
// task's.
func TestEnvironmentAllowlist(t *testing.T) {
	t.Setenv("WORKER_AUTH_TOKEN", "secret-worker-token")
	t.Setenv("SOME_SECRET", "hush")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hush")
	t.Setenv("SCIMESH_TOKEN", "secret-token")
	t.Setenv("SOME_VAR", "passed")
	t.Setenv("LC_ALL", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	b := setup(t)
	out := t.TempDir()
	command := fmt.Sprintf(`cat >/dev/null; env > %s/env; echo id,score; echo a,1`, out)
	b.startWorker(worker.Config{PassEnv: []string{"SOME_VAR"}, Workloads: []worker.Workload{mustWorkload(t, "env="+command)}})
	j := b.job(client.JobRequest{Workload: "env"}, "id,value\na,1\n")
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)

	data, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{"SOME_VAR": "passed", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PATH": os.Getenv("PATH"), "SCIMESH_JOB_ID": j.JobID} {
		if env[k] != want {
			t.Errorf("the command sees %s=%q, want %q", k, env[k], want)
		}
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "TMPDIR": true, "SOME_VAR": true,
		"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true} // the last four, the shell's own
	for k, v := range env {
		if !allowed[k] && !strings.HasPrefix(k, "LC_") && !strings.HasPrefix(k, "SCIMESH_") {
			t.Errorf("the command sees %s=%q, which is not allowed", k, v)
		}
	}
	if v, ok := env["SCIMESH_TOKEN"]; ok {
		t.Errorf("the command sees the worker's SCIMESH_TOKEN=%q", v)
	}
}

// TestLeftoverWorkDirs checks that a worker removes at start the task
// directories that a killed worker left in its work directory, and
// nothing else — not when another live worker shares the directory.
func TestLeftoverWorkDirs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir, outside := t.TempDir(), t.TempDir()
	mk := func(path ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(append([]string{dir}, path...)...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, path), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("s0:01aa-0", "1", "sub")
	write("s0:01aa-0/1/sub/out.csv")
	mk("s0:01aa-0", "2")
	mk("s0:01aa-1") // an empty task directory
	mk("notes")     // no task ID
	mk("s0:01aa-2", "1")
	write("s0:01aa-2/README")                // a task's name, but not only attempts in it
	write("s0:01aa-3")                       // a file
	mk(".scimesh-swept-1", "s0:01aa-5", "1") // a sweep that was cut short
	if err := os.MkdirAll(filepath.Join(outside, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "1", "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "s0:01aa-4")); err != nil {
		t.Fatal(err)
	}

	wl := []worker.Workload{mustWorkload(t, "score="+scoreCommand)}
	first := b.startWorker(worker.Config{WorkDir: dir, Workloads: wl})
	first.waitLog(t, "worker started", 10*time.Second)
	for path, want := range map[string]bool{
		"s0:01aa-0": false, "s0:01aa-1": false, ".scimesh-swept-1": false,
		"notes": true, "s0:01aa-2/README": true, "s0:01aa-3": true, "s0:01aa-4": true,
	} {
		if _, err := os.Lstat(filepath.Join(dir, path)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", path, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "1", "keep")); err != nil {
		t.Errorf("the sweep followed a symbolic link out of the work directory: %v", err)
	}

	// A second worker on the same directory while the first runs: the
	// first one's task directories are not leftovers.
	mk("s0:01bb-0", "1")
	second := b.startWorker(worker.Config{WorkDir: dir, Workloads: wl})
	second.waitLog(t, "another running worker uses this work directory", 10*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "s0:01bb-0", "1")); err != nil {
		t.Errorf("a worker removed a task directory while another worker shares the work directory: %v", err)
	}
}

// timeoutProxy is a proxy in front of the bundle's coordinator that adds
// "timeout_seconds": seconds to every claimed task. It stands in for the
// coordinator's side of the job's timeout_seconds, which is built
// separately: once jobs carry the field, such tests create the job with it
// instead.
func timeoutProxy(t *testing.T, b *bundle, seconds int) string {
	t.Helper()
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = tr
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a claim cut short when the worker stops
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/tasks/claim" || resp.StatusCode != http.StatusOK {
			return nil
		}
		var task map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&task); err != nil {
			return err
		}
		resp.Body.Close()
		task["timeout_seconds"] = seconds
		body, err := json.Marshal(task)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	return srv.URL
}

// TestTimeout checks the job's timeout_seconds on the worker's side: an
// attempt that runs longer is killed — a command with every process it
// started, a built-in through its context — and reported as a retryable
// failure whose error starts "timed out after N s".
func TestTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pids := t.TempDir()
	// A chunk that never ends: the built-in waits for its rows.
	drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "id,fingerprint\n")
		for i := 0; i < 600; i++ {
			_, _ = fmt.Fprintf(w, "m%d,ff00\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(drip.Close) // after the parallel subtests
	b.startWorkerAt(timeoutProxy(t, b, 1), worker.Config{Concurrency: 2, Workloads: []worker.Workload{
		mustWorkload(t, "sleep="+sleeper(pids)),
		mustWorkload(t, "tanimoto"),
	}})

	check := func(t *testing.T, j *client.Job) {
		t.Helper()
		began := time.Now()
		b.waitJob(j.JobID, client.JobFailed, 30*time.Second)
		tk := b.tasks(j.JobID)[0]
		if tk.Attempt != 2 || !strings.HasPrefix(tk.Error, "timed out after 1 s") {
			t.Errorf("task: attempt %d, error %q; want failed after 2 attempts (retryable), error starting %q", tk.Attempt, tk.Error, "timed out after 1 s")
		}
		if took := time.Since(began); took > 20*time.Second {
			t.Errorf("two attempts of a 1 s timeout took %v", took)
		}
	}
	t.Run("command", func(t *testing.T) {
		t.Parallel()
		j := b.job(client.JobRequest{Workload: "sleep", MaxAttempts: 2}, "id,value\na,1\n")
		sh := readPID(t, filepath.Join(pids, "0.sh"), 10*time.Second)
		child := readPID(t, filepath.Join(pids, "0.child"), 10*time.Second)
		check(t, j)
		waitGone(t, 5*time.Second, sh, child)
	})
	t.Run("built-in", func(t *testing.T) {
		t.Parallel()
		c := ref(drip.URL+"/endless.csv", nil)
		c.Bytes = 0
		j := b.createJob(client.JobRequest{Workload: "tanimoto", MaxAttempts: 2, Parameters: json.RawMessage(`{"query":"ff00"}`),
			Input: client.JobInput{Chunks: []client.ChunkRef{c}}})
		check(t, j)
	})
}
