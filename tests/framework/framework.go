// Package framework lets one end-to-end test body run against either kind
// of SciMesh, as etcd's tests/framework does: the scimesh binary run as
// serve and worker processes and driven through its client commands
// (package binary), or internal/server, internal/worker and
// internal/client in the test's own process (package inprocess). A body
// asks a Runner for a coordinator and its workers and drives jobs through
// the coordinator's Client; what it checks must hold for both.
//
// It holds only what the shared bodies use: they are in tests/e2e
// (common_test.go), where forEachRunner runs each under both runners.
package framework

import (
	"context"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// The tokens of the coordinators runners start: a client's, which is the
// admin account's, and the workers'.
const (
	ClientToken = "client-token-of-the-framework"
	WorkerToken = "worker-token-of-the-framework"
)

// Runner starts coordinators and workers of one kind. What it starts is
// stopped at the cleanup of the test that started it.
type Runner interface {
	// Name names the runner in subtests: "binary" or "in-process".
	Name() string
	// Serve starts a coordinator on a loopback address with the tokens
	// above and returns once it is ready.
	Serve(t testing.TB, cfg ServeConfig) Coordinator
	// Worker starts a worker of the coordinator at url.
	Worker(t testing.TB, url string, cfg WorkerConfig)
}

// ServeConfig is what a coordinator differs by.
type ServeConfig struct {
	// DB is the database URL (sqlite:PATH or postgres://…); empty means a
	// new SQLite file of the test's. The data directory is always new.
	DB string
}

// WorkerConfig is what a worker differs by.
type WorkerConfig struct {
	// Workloads are scimesh worker's --workload values: NAME=COMMAND, or
	// a built-in's NAME.
	Workloads []string
	// Concurrency is how many tasks run at once; 0 means 1.
	Concurrency int
}

// Coordinator is a running coordinator.
type Coordinator interface {
	// URL is its base URL; it stays the same across Restart.
	URL() string
	// Client is a client of it with the client token.
	Client() Client
	// Restart stops the coordinator, as abruptly as the runner can (the
	// binary's is killed with SIGKILL; the in-process one cancels its
	// requests and closes its store), and starts it again on the same
	// address, database and data directory.
	Restart(t testing.TB)
}

// JobSpec is a job over a CSV table; zero fields take the coordinator's
// defaults.
type JobSpec struct {
	Workload    string
	TopK        int
	ChunkRows   int
	MaxAttempts int
	// LeaseSeconds is how long a worker holds a chunk between heartbeats;
	// a worker learns of a cancel at its next heartbeat, a third of it.
	LeaseSeconds int
	// Params are the workload's parameters, each a string.
	Params map[string]string
}

// Client is what a scientist does with jobs: with the binary, by running
// the client commands (scimesh submit, status, …); in process, through
// internal/client. An error's text is what the user is shown: the
// command's error output, or the client's error, so that both name the
// HTTP status and the error code of a refused request.
type Client interface {
	// Submit uploads the CSV table at path and creates a job over it, and
	// returns the job's ID.
	Submit(ctx context.Context, path string, spec JobSpec) (string, error)
	// Status returns the job as GET /jobs/{id} does.
	Status(ctx context.Context, jobID string) (*client.Job, error)
	// Wait follows the job until it is final (completed, failed or
	// cancelled) and returns it.
	Wait(ctx context.Context, jobID string) (*client.Job, error)
	// Result returns the final CSV of a completed job.
	Result(ctx context.Context, jobID string) ([]byte, error)
	// Cancel cancels the job.
	Cancel(ctx context.Context, jobID string) error
	// Retry runs a failed or cancelled job's unfinished chunks again.
	Retry(ctx context.Context, jobID string) error
	// Jobs lists the jobs, newest first (one page).
	Jobs(ctx context.Context) ([]client.Job, error)
}
