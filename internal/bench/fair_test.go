package bench

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/server"
)

// startCoordinator starts a coordinator with tokens on a SQLite file,
// until t ends, and returns it with its database's URL and the tokens.
func startCoordinator(t *testing.T) (*server.Server, string, auth.Tokens) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tokens := auth.Tokens{Worker: "worker-token-0123456789", Client: "client-token-0123456789"}
	db := "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", Shard: "s0", Migrate: true, Tokens: tokens, DB: db,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	wait := srv.Start(ctx)
	t.Cleanup(func() { cancel(); _ = wait(); srv.Close() })
	return srv, db, tokens
}

// TestRunAccounts drives a coordinator with the work of three accounts,
// weights 1, 2 and 1, made in its database: every measured lifecycle is
// done, the backlog left, and the report adds each account's share.
func TestRunAccounts(t *testing.T) {
	t.Parallel()
	srv, db, tokens := startCoordinator(t)
	var out strings.Builder
	c := Config{Coordinator: srv.URL(), SeedDB: db, WorkerToken: tokens.Worker, ClientToken: tokens.Client,
		Accounts: 3, JobsPerAccount: 2, Weights: []int{1, 2}, Workers: 4, Tasks: 200, Backlog: 20, Batch: 1}
	if err := Run(t.Context(), &out, c); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	want := regexp.MustCompile(`^coordinator http://127\.0\.0\.1:[0-9]+: seeded 220 pending chunk tasks of 6 jobs of 3 accounts in [0-9.]+m?s\n` +
		`workers 4, batch 1, backlog 20: 200 lifecycles in [0-9.]+m?s = [0-9]+ lifecycles/s; claim p50 [0-9.]+[mµ]?s p99 [0-9.]+[mµ]?s \(200 claims\); pending after 2[0-9]\n` +
		`shares of the middle 80% \([0-9]+ lifecycles\): bench-[0-9a-f]+-000 \(weight 1\) [0-9.]+% = [0-9.]+× its share, ` +
		`bench-[0-9a-f]+-001 \(weight 2\) [0-9.]+% = [0-9.]+× its share, bench-[0-9a-f]+-002 \(weight 1\) [0-9.]+% = [0-9.]+× its share\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("bench printed\n%s\nwant lines matching %s", out.String(), want)
	}
	if err := Run(t.Context(), &strings.Builder{}, Config{Coordinator: srv.URL(), Accounts: 2, JobsPerAccount: 1, Workers: 1, Tasks: 10, Batch: 1}); err == nil ||
		!strings.Contains(err.Error(), "--seed-db") {
		t.Errorf("--accounts without --seed-db: %v, want it refused", err)
	}
}

// TestRunSmall: a small job created behind another account's big one is
// reported done, with how long it took against its own work.
func TestRunSmall(t *testing.T) {
	t.Parallel()
	srv, db, tokens := startCoordinator(t)
	var out strings.Builder
	c := SmallConfig{Coordinator: srv.URL(), SeedDB: db, WorkerToken: tokens.Worker, ClientToken: tokens.Client,
		Workers: 2, TaskTime: 10 * time.Millisecond, Big: 40, Small: 2, Delay: 50 * time.Millisecond}
	if err := RunSmall(t.Context(), &out, c); err != nil {
		t.Fatalf("bench small: %v\n%s", err, out.String())
	}
	want := regexp.MustCompile(`^workers 2, 10ms a task: a job of 2 chunks created 50ms after another account's of 40 completed in [0-9.]+m?s, ` +
		`[0-9.]+× its own work \(20ms\); the big job was [0-9]+/40 done\n$`)
	if !want.MatchString(out.String()) {
		t.Errorf("bench small printed\n%s\nwant a line matching %s", out.String(), want)
	}
}
