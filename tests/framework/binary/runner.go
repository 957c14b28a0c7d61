package binary

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/tests/framework"
)

// Runner runs the scimesh binary at Path (see Build).
type Runner struct {
	Path string
}

var _ framework.Runner = Runner{}

// ReadyClient asks whether a coordinator is ready; an address that accepts
// connections but never answers must not hang the test.
var ReadyClient = &http.Client{Timeout: 5 * time.Second}

// workers numbers the workers, for their IDs.
var workers atomic.Int64

// Name is "binary".
func (Runner) Name() string { return "binary" }

// Serve runs `scimesh serve` with the framework's tokens on a free
// loopback address, cfg.DB and a data directory of t's.
func (r Runner) Serve(t testing.TB, cfg framework.ServeConfig) framework.Coordinator {
	t.Helper()
	dir := t.TempDir()
	db := cfg.DB
	if db == "" {
		db = "sqlite:" + filepath.Join(dir, "scimesh.db")
	}
	c := &coordinator{
		path: r.Path, dir: dir, addr: testenv.FreeAddr(t),
		env:  []string{"CLIENT_AUTH_TOKEN=" + framework.ClientToken, "WORKER_AUTH_TOKEN=" + framework.WorkerToken},
		args: []string{"--db", db, "--data-dir", filepath.Join(dir, "data")},
	}
	c.proc = Serve(t, ReadyClient, c.path, c.dir, c.addr, c.env, c.args...)
	return c
}

// Worker runs `scimesh worker` with the worker token, in a directory of
// t's.
func (r Runner) Worker(t testing.TB, url string, cfg framework.WorkerConfig) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"worker", "--id", fmt.Sprintf("w%d", workers.Add(1)), "--concurrency", strconv.Itoa(max(cfg.Concurrency, 1)),
		"--work-dir", filepath.Join(dir, "work")}
	for _, w := range cfg.Workloads {
		args = append(args, "--workload", w)
	}
	Start(t, r.Path, dir, []string{"SCIMESH_COORDINATOR=" + url, "SCIMESH_TOKEN=" + framework.WorkerToken}, args...)
}

// coordinator is a `scimesh serve` process, and how to start it again.
type coordinator struct {
	path, dir, addr string
	env, args       []string
	proc            *Proc
}

func (c *coordinator) URL() string { return "http://" + c.addr }

func (c *coordinator) Client() framework.Client {
	return &cli{path: c.path, dir: c.dir, env: []string{"SCIMESH_COORDINATOR=" + c.URL(), "SCIMESH_TOKEN=" + framework.ClientToken}}
}

// Restart kills the process with SIGKILL, which leaves it no time to
// finish anything, and starts it again.
func (c *coordinator) Restart(t testing.TB) {
	t.Helper()
	if err := c.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.proc.Wait()
	framework.CheckDown(t, c.addr)
	c.proc = Serve(t, ReadyClient, c.path, c.dir, c.addr, c.env, c.args...)
}
