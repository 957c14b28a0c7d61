// Package inprocess is the framework's runner of SciMesh in the test's own
// process: a coordinator of internal/server on a loopback listener,
// workers of internal/worker, and internal/client for Client. What it
// starts, goroutines included, is stopped at the cleanup of the test that
// started it.
package inprocess

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/internal/worker"
	"github.com/scimesh/scimesh/tests/framework"
)

// Runner runs coordinators and workers in the test's process.
type Runner struct{}

var _ framework.Runner = Runner{}

// workers numbers the workers, for their IDs.
var workers atomic.Int64

// Name is "in-process".
func (Runner) Name() string { return "in-process" }

// Serve starts a server.Server with the framework's tokens on a free
// loopback address, cfg.DB and a data directory of t's.
func (Runner) Serve(t testing.TB, cfg framework.ServeConfig) framework.Coordinator {
	t.Helper()
	dir := t.TempDir()
	log := &testenv.Buffer{}
	c := &coordinator{log: log, cfg: server.Config{
		Addr:    testenv.FreeAddr(t),
		DB:      cfg.DB,
		DataDir: filepath.Join(dir, "data"),
		Tokens:  auth.Tokens{Client: framework.ClientToken, Worker: framework.WorkerToken},
		Logger:  slog.New(slog.NewTextHandler(log, nil)),
	}}
	if c.cfg.DB == "" {
		c.cfg.DB = "sqlite:" + filepath.Join(dir, "scimesh.db")
	}
	c.start(t)
	c.client = &rest{c: client.New(c.URL(), framework.ClientToken)}
	t.Cleanup(func() { // before the server's own, which Start registered
		c.client.c.CloseIdleConnections()
		if t.Failed() {
			t.Logf("coordinator %s log:\n%s", c.URL(), testenv.LastLines(log.String(), 30))
		}
	})
	return c
}

// Worker runs a worker.Worker with the worker token, in a directory of
// t's, until t's cleanup.
func (Runner) Worker(t testing.TB, url string, cfg framework.WorkerConfig) {
	t.Helper()
	wls, err := worker.ParseWorkloads(cfg.Workloads, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &testenv.Buffer{}
	cl := client.New(url, framework.WorkerToken)
	w, err := worker.New(worker.Config{
		Client: cl, ID: fmt.Sprintf("w%d", workers.Add(1)), Concurrency: max(cfg.Concurrency, 1), Workloads: wls,
		WorkDir: filepath.Join(t.TempDir(), "work"), Logger: slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel() // without a grace period: running tasks are killed at once
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
		cl.CloseIdleConnections()
		if t.Failed() {
			t.Logf("worker log:\n%s", testenv.LastLines(log.String(), 30))
		}
	})
}

// coordinator is a server.Server running until stop.
type coordinator struct {
	cfg    server.Config // Addr is the address it listens on
	log    *testenv.Buffer
	client *rest
	stop   func() // ends Run and waits for it
}

// start builds the server from cfg and runs it.
func (c *coordinator) start(t testing.TB) {
	t.Helper()
	var srv *server.Server
	srv, c.stop = Start(t, c.cfg)
	c.cfg.Addr = srv.Addr()
}

// Start builds a coordinator from cfg and runs it in the test's process
// until stop, or else t's cleanup, ends it; an error of its Run fails t.
func Start(t testing.TB, cfg server.Config) (srv *server.Server, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	wait := srv.Start(ctx)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := wait(); err != nil {
				t.Errorf("server.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

func (c *coordinator) URL() string { return "http://" + c.cfg.Addr }

func (c *coordinator) Client() framework.Client { return c.client }

// Restart stops the server, which cancels its requests and closes its
// store, and builds and runs a new one from the same Config.
func (c *coordinator) Restart(t testing.TB) {
	t.Helper()
	c.stop()
	framework.CheckDown(t, c.cfg.Addr)
	c.start(t)
}
