// Package pgtest gives tests a fresh, migrated, empty PostgreSQL database
// each.
//
// Tests call Main from TestMain and URL wherever they need a database:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.URL(t) // a new database, dropped when t ends
//		…
//	}
//
// When TEST_DATABASE_URL is set, the databases are created on that server
// (its user must be allowed to create databases). Otherwise the first call
// to URL starts one disposable cluster for the whole test binary from the
// installed server binaries (internal/pgcluster), and Main stops it and
// removes its files once the tests have run. Without server binaries the
// tests skip with a loud message — unless CI is set, where a missing server
// fails them.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/pgcluster"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/testenv"
)

// EnvURL names the environment variable holding the URL of an existing
// server to create test databases on, instead of starting a cluster.
const EnvURL = "TEST_DATABASE_URL"

// shared is the one server of the test binary. It is package state because
// the server outlives every test and is stopped by Main.
var shared struct {
	mainCalled atomic.Bool
	seq        atomic.Int64

	once     sync.Once
	adminURL string             // where databases are created and dropped
	cluster  *pgcluster.Cluster // nil when using EnvURL
	err      error
}

// Main runs the tests of m, then stops the cluster that URL started (if it
// did) and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to do after the tests (remove
// what it made): it runs the tests, stops the cluster and returns the
// exit code instead of exiting.
func Run(m *testing.M) int {
	shared.mainCalled.Store(true)
	code := m.Run()
	if shared.cluster != nil {
		if err := shared.cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the test cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL creates a new database with a unique name, applies the postgres
// store's migrations to it, registers a cleanup on t that drops it, and
// returns its postgres:// URL. It skips t when there is no server to use
// (fails it when CI is set).
func URL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adminURL := server(t)
	name := dbName(t)
	if err := pgcluster.CreateDatabase(ctx, adminURL, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgcluster.DropDatabase(ctx, adminURL, name); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	url, err := pgcluster.DatabaseURL(adminURL, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateUp(ctx, url); err != nil {
		t.Fatalf("pgtest: migrate test database %s: %v", name, err)
	}
	return url
}

// server returns the admin URL of the binary's server, starting the cluster
// on first use.
func server(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared.adminURL = u
			return
		}
		if !shared.mainCalled.Load() {
			shared.err = errors.New("pgtest: call pgtest.Main(m) from TestMain: it stops the cluster that URL starts")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgcluster.RAMDir()})
		if err != nil {
			shared.err = err
			return
		}
		shared.cluster = c
		shared.adminURL = c.URL("postgres")
	})
	if errors.Is(shared.err, pgcluster.ErrNoServer) {
		msg := "pgtest: NO POSTGRESQL: " + shared.err.Error() +
			"; install PostgreSQL or set " + EnvURL + "=postgres://… to run the PostgreSQL tests"
		testenv.Missing(t, msg)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.adminURL
}

// dbName is a database name unique on the server: the process ID and a
// counter, then as much of the test's name as fits, for people reading
// pg_stat_activity.
func dbName(t testing.TB) string {
	name := fmt.Sprintf("scimesh_%d_%d_", os.Getpid(), shared.seq.Add(1))
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len()+len(name) >= 63 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return name + b.String()
}

// migrateUp applies the postgres store's migrations to the database at url.
func migrateUp(ctx context.Context, url string) error {
	ms, err := postgres.Migrations()
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = migrate.Up(ctx, st.MigrateDB(), ms)
	return err
}
