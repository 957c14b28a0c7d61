package pgcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/testenv"
)

// orphanDirEnv, set, makes the test binary the child of TestReapOrphans.
const orphanDirEnv = "PGCLUSTER_ORPHAN_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(orphanDirEnv); dir != "" {
		orphanHelper(dir)
	}
	os.Exit(m.Run())
}

// needServer skips t when there are no server binaries, loudly, and fails
// it instead when CI is set.
func needServer(t *testing.T) {
	t.Helper()
	_, err := findBinDir()
	if !errors.Is(err, ErrNoServer) {
		return
	}
	msg := "NO POSTGRESQL: " + err.Error() + "; install PostgreSQL to run the cluster tests"
	testenv.Missing(t, msg)
}

// TestStart starts a durable cluster, creates a database on it, and stops
// it.
func TestStart(t *testing.T) {
	t.Parallel()
	needServer(t)
	ctx := context.Background()
	c, err := Start(ctx, Options{Durable: true, MaxConnections: 20,
		Settings: map[string]string{"shared_buffers": "32MB"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Stop the cluster's directory %s: %v, want it gone", c.dir, err)
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

// TestStartOnPort: a cluster asked for a port listens on it, so a program
// can be pointed at the server before it exists.
func TestStartOnPort(t *testing.T) {
	t.Parallel()
	needServer(t)
	ctx := context.Background()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(ctx, Options{Dir: RAMDir(), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Port() != port {
		t.Errorf("Port() = %d, want %d", c.Port(), port)
	}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port))
	if err != nil {
		t.Fatalf("connect to port %d: %v", port, err)
	}
	conn.Close(ctx)
}

// TestReapOrphans kills a process that started a cluster, as a test
// timeout would, and checks that the next Start in the same directory
// stops the orphaned server and removes its files.
func TestReapOrphans(t *testing.T) {
	t.Parallel()
	needServer(t)
	if testing.Short() {
		t.Skip("starts two clusters")
	}
	ctx := t.Context()
	parent, err := os.MkdirTemp("", "pgcluster-reap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(parent)
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), orphanDirEnv+"="+parent)
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

	c, err := Start(ctx, Options{Dir: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	if len(dirs) != 1 {
		t.Errorf("after Start %s holds %q; want only the new cluster's directory", parent, dirs)
	}
	if conn, err := pgx.Connect(ctx, orphanURL); err == nil {
		conn.Close(ctx)
		t.Errorf("the orphaned server at %s still answers", orphanURL)
	}
}

// orphanHelper is the child of TestReapOrphans: it starts a cluster in dir,
// prints its URL and waits to be killed.
func orphanHelper(dir string) {
	c, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(c.URL("postgres"))
	select {}
}

func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ admin, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/x_1?sslmode=disable"},
		{"postgresql://u:pw@db.example/admin", "postgresql://u:pw@db.example/x_1"},
		{"host=/tmp user=postgres dbname=postgres", "host=/tmp user=postgres dbname=postgres dbname=x_1"},
	} {
		got, err := DatabaseURL(c.admin, "x_1")
		if err != nil || got != c.want {
			t.Errorf("DatabaseURL(%q) = %q, %v; want %q", c.admin, got, err, c.want)
		}
	}
}
