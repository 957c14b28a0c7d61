package storeopen_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/storeopen"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://app:s3cret@db.example:5432/scimesh", "postgres://app:***@db.example:5432/scimesh"},
		{"postgresql://app@db.example/scimesh", "postgresql://app:***@db.example/scimesh"},
		{"postgres://db.example/scimesh", "postgres://db.example/scimesh"},
		{"sqlite:./scimesh-data/scimesh.db", "sqlite:./scimesh-data/scimesh.db"},
	} {
		if got := storeopen.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestOpenRefuses: a URL of no known database, or a SQLite URL without a
// file, is refused with what to write instead, and a password never shows.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"mysql://app:s3cret@db.example/scimesh", "use sqlite:PATH or postgres://USER@HOST/DB"},
		{"sqlite:", "names no file"},
	} {
		_, err := storeopen.Open(ctx, c.url, storeopen.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): %v, want an error saying %q without the password", c.url, err, c.want)
		}
		if _, err := storeopen.OpenSchema(ctx, c.url); c.url != "sqlite:" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("OpenSchema(%q): %v, want an error saying %q", c.url, err, c.want)
		}
	}
}

// TestOpenSQLite opens a new SQLite store (migrated by itself) and its
// schema: every migration is applied.
func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "scimesh.db")
	st, err := storeopen.Open(ctx, url, storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	checkApplied(t, url)
}

// TestOpenPostgres: an unmigrated PostgreSQL database is refused without
// Migrate and migrated with it.
func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t) // migrated: revert it all first
	sc, err := storeopen.OpenSchema(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for {
		v, err := migrate.Down(ctx, sc.DB, sc.Migrations)
		if err != nil {
			t.Fatal(err)
		}
		if v == 0 {
			break
		}
	}
	sc.Close()
	if st, err := storeopen.Open(ctx, url, storeopen.Options{}); err == nil {
		st.Close()
		t.Fatal("Open accepted an unmigrated PostgreSQL database")
	}
	st, err := storeopen.Open(ctx, url, storeopen.Options{Migrate: true, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	checkApplied(t, url)
}

func checkApplied(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	sc, err := storeopen.OpenSchema(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	st, err := migrate.Status(ctx, sc.DB, sc.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) == 0 || len(st) != len(sc.Migrations) {
		t.Fatalf("%d migrations in the status, %d in the driver", len(st), len(sc.Migrations))
	}
	for _, s := range st {
		if !s.Applied {
			t.Errorf("migration %04d_%s is pending, want applied", s.Version, s.Name)
		}
	}
}

func TestBlobs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "dir")
	if _, err := storeopen.Blobs(context.Background(), "", dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "blobs")); err != nil || !fi.IsDir() {
		t.Fatalf("no blobs directory under the data directory: %v", err)
	}
}
