package bench

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestRunRemote drives a coordinator that bench did not start, with its
// tokens, over REST single and batch forms (with either load generator)
// and over gRPC, one run after
// another on the same coordinator; after each, the coordinator itself
// (GET /jobs/{id}, Queue.Query of every tree) must count every measured
// task completed and the backlog pending, none leased: a lifecycle the
// generator counted but did not complete, or did twice, fails it.
func TestRunRemote(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, _, tokens := startCoordinator(t)
	cl := client.New(srv.URL(), tokens.Client)
	defer cl.CloseIdleConnections()

	const tasks, backlog = 200, 13
	for _, run := range []struct {
		protocol, load string
		batch          int
	}{{ProtocolREST, LoadClient, 1}, {ProtocolREST, LoadClient, 50}, {ProtocolREST, LoadLean, 1}, {ProtocolREST, LoadLean, 50}, {ProtocolGRPC, "", 1}} {
		name := fmt.Sprintf("%s %s batch %d", run.protocol, run.load, run.batch)
		var out strings.Builder
		c := Config{Coordinator: srv.URL(), WorkerToken: tokens.Worker, ClientToken: tokens.Client, Protocol: run.protocol,
			Workers: 4, Tasks: tasks, Backlog: backlog, Batch: run.batch, Load: run.load}
		s, err := runRemote(ctx, &out, c)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out.String())
		}
		want := regexp.MustCompile(`^coordinator http://127\.0\.0\.1:[0-9]+: seeded 213 pending [a-z0-9: -]+ in [0-9.]+m?s\n` +
			fmt.Sprintf(`workers 4, batch %d, backlog 13: 200 lifecycles in [0-9.]+m?s = [0-9]+ lifecycles/s; `, run.batch) +
			`claim p50 [0-9.]+[mµ]?s p99 [0-9.]+[mµ]?s \([0-9]+ claims\); pending after 13\n$`)
		if !want.MatchString(out.String()) {
			t.Errorf("%s printed\n%s\nwant lines matching %s", name, out.String(), want)
		}
		var completed, pending, other int
		if run.protocol == ProtocolGRPC {
			counts, err := countTrees(ctx, srv.URL(), tokens.Client, s.trees, 1)
			if err != nil {
				t.Fatal(err)
			}
			completed, pending = counts[client.TaskCompleted], counts[client.TaskPending]
			other = len(s.trees) - completed - pending
		} else {
			job, err := cl.GetJob(ctx, s.jobID)
			if err != nil {
				t.Fatal(err)
			}
			completed, pending = job.Tasks.Completed, job.Tasks.Pending
			other = job.Tasks.Total - completed - pending
		}
		if completed != tasks || pending != backlog || other != 0 {
			t.Errorf("%s: the coordinator counts %d completed, %d pending, %d otherwise; want %d, %d, 0",
				name, completed, pending, other, tasks, backlog)
		}
	}
}

// TestRunRemoteRefuses: settings a remote run cannot measure are refused
// before anything is sent.
func TestRunRemoteRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		c    Config
		want string
	}{
		{Config{Coordinator: "http://127.0.0.1:1", Protocol: ProtocolGRPC, Workers: 1, Tasks: 10, Batch: 2}, "no batch form"},
		{Config{Coordinator: "http://127.0.0.1:1", Protocol: "soap", Workers: 1, Tasks: 10, Batch: 1}, `--protocol "soap"`},
		{Config{Coordinator: "http://127.0.0.1:1", Workers: 1, Tasks: 10, Batch: 1, CreateChunks: 10}, "--create-chunks"},
		{Config{Coordinator: "http://127.0.0.1:1", Workers: 1, Tasks: 10, Batch: 1, Load: "wrk"}, `--load "wrk"`},
		{Config{Coordinator: "http://127.0.0.1:1", Protocol: ProtocolGRPC, Workers: 1, Tasks: 10, Batch: 1, Load: LoadLean}, "REST only"},
		{Config{DB: "sqlite", Protocol: ProtocolGRPC, Workers: 1, Tasks: 10, Batch: 1}, "--coordinator"},
	} {
		if err := Run(context.Background(), &strings.Builder{}, c.c); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v): %v, want an error with %q", c.c, err, c.want)
		}
	}
}

// TestRunRemoteQuorum: a quorum-2 run by the untrusted keys of two
// accounts, claiming in batches, ends having measured exactly the
// lifecycles asked for, and the coordinator accepted at most one chunk
// for every two of them. (That a worker which finds nothing gives its
// reservation back is TestWorkGivesBack's: this run need not come to it.)
func TestRunRemoteQuorum(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, _, tokens := startCoordinator(t)
	admin := client.New(srv.URL(), tokens.Client)
	defer admin.CloseIdleConnections()
	var keys []string
	for _, name := range []string{"a1", "a2"} {
		a, err := admin.CreateAccount(ctx, name, client.AccountSettings{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := client.New(srv.URL(), a.Token).CreateWorkerKey(ctx, "bench")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Key)
	}
	const tasks, backlog = 400, 40
	var out strings.Builder
	c := Config{Coordinator: srv.URL(), WorkerTokens: keys, ClientToken: tokens.Client, Protocol: ProtocolREST,
		Load: LoadClient, Workers: 6, Tasks: tasks, Backlog: backlog, Batch: 20, JobWorkers: "any", Quorum: 2}
	s, err := runRemote(ctx, &out, c)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := regexp.MustCompile(`workers 6, batch 20, backlog 40: 400 lifecycles in `); !want.MatchString(out.String()) {
		t.Errorf("printed\n%s\nwant a line matching %s", out.String(), want)
	}
	job, err := admin.GetJob(ctx, s.jobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Tasks.Completed == 0 || job.Tasks.Completed > tasks/2 {
		t.Errorf("the coordinator counts %d chunks completed after %d lifecycles of quorum 2; want 1 to %d", job.Tasks.Completed, tasks, tasks/2)
	}
}
