package pgtest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/pgtest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("PGTEST_ORPHAN_DIR"); dir != "" {
		orphanHelper(dir)
	}
	pgtest.Main(m)
}

// TestURL checks that each URL is a distinct, migrated, empty database that
// is dropped when its test ends.
func TestURL(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("first", func(t *testing.T) {
		first = pgtest.URL(t)
		second := pgtest.URL(t)
		if first == second {
			t.Fatalf("two calls returned the same database %s", first)
		}
		conn, err := pgx.Connect(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var jobs, tasks int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM tasks)`).Scan(&jobs, &tasks); err != nil {
			t.Fatalf("the database is not migrated: %v", err)
		}
		if jobs != 0 || tasks != 0 {
			t.Errorf("got %d jobs and %d tasks in a fresh database, want none", jobs, tasks)
		}
	})
	conn, err := pgx.Connect(ctx, first)
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("the database of a finished test still exists: %s", first)
	}
	if !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("connect to the dropped database: got %v, want a \"does not exist\" error", err)
	}
}

// TestStartCluster starts a second, durable cluster beside the shared one,
// creates a database on it, and stops it.
func TestStartCluster(t *testing.T) {
	pgtest.URL(t) // skips (or fails under CI) when there is no server
	if testing.Short() {
		t.Skip("starts a second cluster")
	}
	ctx := context.Background()
	c, err := pgtest.StartCluster(ctx, pgtest.Options{Durable: true, MaxConnections: 20,
		Settings: map[string]string{"shared_buffers": "32MB"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()
	url, err := c.CreateDatabase(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var fsync, sb string
	err = conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('shared_buffers')`).Scan(&fsync, &sb)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fsync != "on" || sb != "32MB" {
		t.Errorf("got fsync=%s shared_buffers=%s, want on and 32MB", fsync, sb)
	}
	if err := c.DropDatabase(ctx, "bench"); err != nil {
		t.Error(err)
	}
	if _, err := c.CreateDatabase(ctx, "Bad-Name"); err == nil {
		t.Error("CreateDatabase accepted the name Bad-Name")
	}
}

// TestReapOrphans kills a process that started a cluster, as a test
// timeout would, and checks that the next StartCluster in the same
// directory stops the orphaned server and removes its files.
func TestReapOrphans(t *testing.T) {
	if os.Getenv("PGTEST_ORPHAN_DIR") != "" {
		return // the child's part runs in TestMain's helper
	}
	pgtest.URL(t) // skips (or fails under CI) when there is no server
	if testing.Short() {
		t.Skip("starts two more clusters")
	}
	ctx := t.Context()
	parent, err := os.MkdirTemp("", "pgtest-reap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(parent)
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "PGTEST_ORPHAN_DIR="+parent)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	orphanURL, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the child did not start a cluster: %v", err)
	}
	orphanURL = strings.TrimSpace(orphanURL)
	child.Process.Kill()
	child.Wait()
	if conn, err := pgx.Connect(ctx, orphanURL); err != nil {
		t.Fatalf("the orphaned server does not answer before the reaping: %v", err)
	} else {
		conn.Close(ctx)
	}

	c, err := pgtest.StartCluster(ctx, pgtest.Options{Dir: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	dirs, _ := filepath.Glob(filepath.Join(parent, "scimesh-pg-*"))
	if len(dirs) != 1 {
		t.Errorf("after StartCluster %s holds %q; want only the new cluster's directory", parent, dirs)
	}
	if conn, err := pgx.Connect(ctx, orphanURL); err == nil {
		conn.Close(ctx)
		t.Errorf("the orphaned server at %s still answers", orphanURL)
	}
}

// orphanHelper is the child of TestReapOrphans: it starts a cluster in dir,
// prints its URL and waits to be killed.
func orphanHelper(dir string) {
	c, err := pgtest.StartCluster(context.Background(), pgtest.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(c.URL("postgres"))
	select {}
}
