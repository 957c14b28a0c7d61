package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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
