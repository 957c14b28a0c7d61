package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func migrations(t *testing.T) []migrate.Migration {
	t.Helper()
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	return ms
}

// connect opens a plain connection to url, closed when t ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func tableExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestMigrateDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ms := migrations(t)
	s, url := openURL(t)
	conn := connect(t, url)
	if err := s.CheckMigrated(ctx); err != nil {
		t.Fatalf("CheckMigrated on a migrated database: %v", err)
	}
	storeJob := func() error { return s.JobInsert(ctx, storetest.NewJob("j1", storetest.Epoch())) }
	if err := storeJob(); err != nil {
		t.Fatal(err)
	}

	for i := len(ms) - 1; i >= 0; i-- {
		v, err := migrate.Down(ctx, s.MigrateDB(), ms)
		if err != nil || v != ms[i].Version {
			t.Fatalf("Down = %d, %v; want %d, nil", v, err, ms[i].Version)
		}
	}
	if v, err := migrate.Down(ctx, s.MigrateDB(), ms); err != nil || v != 0 {
		t.Fatalf("Down with nothing applied = %d, %v; want 0, nil", v, err)
	}
	for _, table := range []string{"jobs", "tasks", "uploads", "task_logs"} {
		if tableExists(t, conn, table) {
			t.Errorf("table %s survived the down migrations", table)
		}
	}
	err := s.CheckMigrated(ctx)
	if !errors.Is(err, postgres.ErrNotMigrated) || !strings.Contains(err.Error(), "scimesh migrate up") {
		t.Errorf("CheckMigrated after Down = %v; want ErrNotMigrated naming `scimesh migrate up`", err)
	}

	done, err := migrate.Up(ctx, s.MigrateDB(), ms)
	if err != nil || len(done) != len(ms) {
		t.Fatalf("Up = %v, %v; want all %d migrations", done, err, len(ms))
	}
	if err := s.CheckMigrated(ctx); err != nil {
		t.Errorf("CheckMigrated after Up: %v", err)
	}
	if err := storeJob(); err != nil {
		t.Errorf("JobInsert after Down and Up: %v (the old row should be gone)", err)
	}
	if n, err := migrate.Pending(ctx, s.MigrateDB(), ms); err != nil || n != 0 {
		t.Errorf("Pending after Up = %d, %v; want 0", n, err)
	}
}

// TestCheckMigrated checks the messages for a database that was never
// migrated and one migrated by a newer program.
func TestCheckMigrated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, url := openURL(t)
	conn := connect(t, url)

	if _, err := conn.Exec(ctx, `INSERT INTO scimesh_migrations (version, name) VALUES (9999, 'future')`); err != nil {
		t.Fatal(err)
	}
	err := s.CheckMigrated(ctx)
	if !errors.Is(err, postgres.ErrNotMigrated) || !strings.Contains(err.Error(), "newer scimesh") {
		t.Errorf("CheckMigrated with an unknown migration = %v; want ErrNotMigrated asking for a newer scimesh", err)
	}

	if _, err := conn.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	err = s.CheckMigrated(ctx)
	if !errors.Is(err, postgres.ErrNotMigrated) || !strings.Contains(err.Error(), "serve --migrate") {
		t.Errorf("CheckMigrated on an empty database = %v; want ErrNotMigrated naming serve --migrate", err)
	}
	if tableExists(t, conn, "scimesh_migrations") {
		t.Error("CheckMigrated created the bookkeeping table; it must only read")
	}
}

// TestConcurrentMigrators runs several migrators on an empty database at
// once, as several `serve --migrate` processes would.
func TestConcurrentMigrators(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ms := migrations(t)
	url := pgtest.URL(t)
	conn := connect(t, url)
	// Back to an empty database, without even the bookkeeping table.
	if _, err := conn.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}

	const migrators = 8
	start := make(chan struct{})
	errs := make(chan error, migrators)
	var wg sync.WaitGroup
	for range migrators {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Go(func() {
			<-start
			_, err := migrate.Up(ctx, s.MigrateDB(), ms)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent migrator failed: %v", err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM scimesh_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Errorf("%d migrations recorded, want %d", n, len(ms))
	}
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckMigrated(ctx); err != nil {
		t.Errorf("CheckMigrated after concurrent migrators: %v", err)
	}
}

// TestMigrateVotes: see storetest.MigrateVotes.
func TestMigrateVotes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ms := migrations(t)
	s, url := openURL(t)
	conn := connect(t, url)
	storetest.MigrateVotes(t, s, func() {
		for {
			v, err := migrate.Down(ctx, s.MigrateDB(), ms)
			if err != nil {
				t.Fatal(err)
			}
			if v == 28 {
				return
			}
		}
	}, func() {
		if _, err := migrate.Up(ctx, s.MigrateDB(), ms); err != nil {
			t.Fatal(err)
		}
	}, func(query string) {
		if _, err := conn.Exec(ctx, query); err != nil {
			t.Fatal(err)
		}
	})
}
