package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/internal/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	workerToken = "wtok"
	clientToken = "ctok"
)

// bundle is a real coordinator (SQLite, engine, REST API over a real
// listener) and a data server hosting chunk files, as a test gets them.
type bundle struct {
	t      *testing.T
	url    string
	client *client.Client // with the client token
	data   *dataServer
}

func setup(t *testing.T) *bundle {
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
	eng := engine.New(st, engine.Config{Blobs: blobs,
		Shard: "s0", Logger: log,
		ReapInterval: 50 * time.Millisecond, StitchInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond,
	})
	mux := http.NewServeMux() // the REST API and the Worker service, as serve mounts them
	gate := auth.NewGate(auth.Tokens{Worker: workerToken, Client: clientToken, Peer: "peer-token"})
	rpc.Mount(mux, eng, gate, func(shard string) bool { return shard == "s0" }, log)
	mux.Handle("/", httpapi.New(eng, gate, log, 0))
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { eng.Run(ctx) })
	data := newDataServer()
	c := client.New(srv.URL, clientToken)
	t.Cleanup(func() {
		c.CloseIdleConnections()
		cancel()
		loops.Wait()
		srv.Close()
		data.Close()
		st.Close()
	})
	return &bundle{t: t, url: srv.URL, client: c, data: data}
}

// dataServer hosts chunk files, as a data server elsewhere would, and
// records the Authorization headers it was sent.
type dataServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	auth  []string
}

func newDataServer() *dataServer {
	d := &dataServer{files: map[string][]byte{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		data, ok := d.files[r.URL.Path]
		d.auth = append(d.auth, r.Header.Get("Authorization"))
		d.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		_, _ = w.Write(data)
	}))
	return d
}

// host serves data at path and returns a chunk reference to it whose
// sha256 is that of claimed (data itself when nil).
func (d *dataServer) host(path string, data, claimed []byte) client.ChunkRef {
	d.mu.Lock()
	d.files[path] = data
	d.mu.Unlock()
	if claimed == nil {
		claimed = data
	}
	sum := sha256.Sum256(claimed)
	return client.ChunkRef{URI: d.URL + path, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(claimed))}
}

// authHeaders returns the Authorization headers the server was sent.
func (d *dataServer) authHeaders() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.auth...)
}

// job creates a job over chunks, each hosted on the data server.
func (b *bundle) job(req client.JobRequest, chunks ...string) *client.Job {
	b.t.Helper()
	prefix := fmt.Sprintf("/%s/%d", strings.ReplaceAll(b.t.Name(), "/", "_"), time.Now().UnixNano())
	for i, c := range chunks {
		req.Input.Chunks = append(req.Input.Chunks, b.data.host(fmt.Sprintf("%s/c%d.csv", prefix, i), []byte(c), nil))
	}
	return b.createJob(req)
}

func (b *bundle) createJob(req client.JobRequest) *client.Job {
	b.t.Helper()
	j, err := b.client.CreateJob(b.t.Context(), &req, "")
	if err != nil {
		b.t.Fatalf("create job: %v", err)
	}
	return j
}

// waitJob polls until the job has status, failing the test after timeout.
func (b *bundle) waitJob(id, status string, timeout time.Duration) *client.Job {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := b.client.GetJob(b.t.Context(), id)
		if err != nil {
			b.t.Fatalf("get job: %v", err)
		}
		if j.Status == status {
			return j
		}
		if time.Now().After(deadline) || (j.Final() && status != j.Status) {
			b.t.Fatalf("job %s is %s (error %q), want %s", id, j.Status, j.Error, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tasks returns the job's chunk tasks.
func (b *bundle) tasks(jobID string) []client.Task {
	b.t.Helper()
	l, err := b.client.ListTasks(b.t.Context(), jobID, client.ListOptions{})
	if err != nil {
		b.t.Fatalf("list tasks: %v", err)
	}
	return l.Tasks
}

// result returns the job's final CSV.
func (b *bundle) result(jobID string) string {
	b.t.Helper()
	rc, err := b.client.Result(b.t.Context(), jobID)
	if err != nil {
		b.t.Fatalf("result: %v", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		b.t.Fatalf("read result: %v", err)
	}
	return string(data)
}

// running is a worker running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	client *client.Client
	logs   *testenv.Buffer
	worker *worker.Worker
}

// startWorker runs a worker on the bundle's coordinator with cfg (the
// client, ID and quick tuning filled in when zero) until stop or the end
// of the test.
func (b *bundle) startWorker(cfg worker.Config) *running {
	b.t.Helper()
	return b.startWorkerAt(b.url, cfg)
}

// startWorkerAt is startWorker with the coordinator at url, such as a
// proxy in front of the bundle's.
func (b *bundle) startWorkerAt(url string, cfg worker.Config) *running {
	b.t.Helper()
	if cfg.ID == "" {
		cfg.ID = "w-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = b.t.TempDir()
	}
	if cfg.ClaimWait == 0 {
		cfg.ClaimWait = 2 * time.Second
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	}
	if cfg.AllowInputHosts == nil {
		// The data server listens on loopback, which a worker refuses
		// by default; a test of that default gives an empty, non-nil list.
		cfg.AllowInputHosts = []string{"127.0.0.0/8"}
	}
	if cfg.LogInterval == 0 {
		cfg.LogInterval = 50 * time.Millisecond
	}
	logs := &testenv.Buffer{}
	cfg.Logger = slogTo(logs)
	c := client.New(url, workerToken)
	cfg.Client = c
	w, err := worker.New(cfg)
	if err != nil {
		b.t.Fatalf("new worker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), client: c, logs: logs, worker: w}
	go func() { r.done <- w.Run(ctx) }()
	b.t.Cleanup(func() {
		if err := r.stop(b.t); err != nil {
			b.t.Errorf("worker.Run: %v", err)
		}
		if b.t.Failed() {
			b.t.Logf("worker log:\n%s", logs.String())
		}
	})
	return r
}

// waitLog waits until the worker logged text, failing the test after
// timeout.
func (r *running) waitLog(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(r.logs.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not log %q within %v:\n%s", text, timeout, r.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the worker down as SIGTERM would and returns Run's error.
func (r *running) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		r.client.CloseIdleConnections()
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s")
		return nil
	}
}

// slogTo returns a logger that writes every level to w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// The state follows the command name in parentheses.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			return s[i+2] != 'Z'
		}
		return true
	}
	if !errors.Is(err, os.ErrNotExist) {
		return syscall.Kill(pid, 0) == nil
	}
	return false
}

// readPID waits for a file holding a process ID and returns the ID.
func readPID(t *testing.T, path string, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file %s after %v", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits until none of pids runs, failing the test after timeout.
func waitGone(t *testing.T, timeout time.Duration, pids ...int) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return time.Since(began)
		}
		if time.Since(began) > timeout {
			t.Fatalf("processes %v still run %v later", left, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
