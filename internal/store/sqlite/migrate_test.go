package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func TestMigrateDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	openStore(t, path) // applies every migration
	s, err := OpenNoMigrate(ctx, path)
	if err != nil {
		t.Fatalf("OpenNoMigrate: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Migrations() = %d migrations, %v", len(ms), err)
	}
	db := s.MigrateDB()
	if n, err := migrate.Pending(ctx, db, ms); err != nil || n != 0 {
		t.Fatalf("Pending after Open = %d, %v; want 0", n, err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		v, err := migrate.Down(ctx, db, ms)
		if err != nil || v != ms[i].Version {
			t.Fatalf("Down = %d, %v; want %d", v, err, ms[i].Version)
		}
	}
	if v, err := migrate.Down(ctx, db, ms); err != nil || v != 0 {
		t.Fatalf("Down with nothing applied = %d, %v; want 0", v, err)
	}
	if _, err := s.JobGet(ctx, "j1"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("JobGet with no schema = %v, want an error other than ErrNotFound", err)
	}
	st, err := migrate.Status(ctx, db, ms)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, m := range st {
		if m.Applied {
			t.Errorf("migration %d applied after Down", m.Version)
		}
	}
	done, err := migrate.Up(ctx, db, ms)
	if err != nil || len(done) != len(ms) {
		t.Fatalf("Up = %v, %v; want all %d", done, err, len(ms))
	}
	// The store works on the schema it got back, even inside a transaction
	// (whose statements OpenNoMigrate never prepared).
	err = s.InTx(ctx, func(q store.Querier) error {
		j := storetest.NewJob("j1", storetest.Epoch())
		if err := q.JobInsert(ctx, j); err != nil {
			return err
		}
		return q.TaskInsert(ctx, storetest.NewTasks(j, 200))
	})
	if err != nil {
		t.Fatalf("InTx after Up: %v", err)
	}
	if _, err := s.JobGet(ctx, "j1"); err != nil {
		t.Errorf("JobGet after Up: %v", err)
	}
}

// TestMigrateOwnership: jobs, tasks and uploads made before accounts
// (migration 18) belong to the built-in admin account once migrated.
func TestMigrateOwnership(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	s := openStore(t, path)
	j := storetest.NewJob("j1", storetest.Epoch())
	j.Owner = "ada"
	tasks := storetest.NewTasks(j, 1)
	u := &domain.Upload{ID: "0:u1", SHA256: "s", Bytes: 1, Rows: 1, BlobKey: "u-1", Owner: "ada", CreatedAt: storetest.Epoch()}
	err := s.InTx(ctx, func(q store.Querier) error {
		if err := q.JobInsert(ctx, j); err != nil {
			return err
		}
		if err := q.UploadInsert(ctx, u); err != nil {
			return err
		}
		return q.TaskInsert(ctx, tasks)
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db := s.MigrateDB()
	for {
		v, err := migrate.Down(ctx, db, ms)
		if err != nil {
			t.Fatal(err)
		}
		if v == 18 {
			break
		}
	}
	if _, err := migrate.Up(ctx, db, ms); err != nil {
		t.Fatal(err)
	}
	got, err := s.JobGet(ctx, "j1")
	if err != nil || got.Owner != domain.AdminAccount {
		t.Errorf("job from before accounts: %+v, %v; want admin's", got, err)
	}
	task, err := s.TaskGet(ctx, tasks[1].ID)
	if err != nil || task.Owner != domain.AdminAccount {
		t.Errorf("task from before accounts: %+v, %v; want admin's", task, err)
	}
	up, err := s.UploadGet(ctx, "0:u1")
	if err != nil || up.Owner != domain.AdminAccount {
		t.Errorf("upload from before accounts: %+v, %v; want admin's", up, err)
	}
}

// TestMigrateVotes: see storetest.MigrateVotes.
func TestMigrateVotes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db := s.MigrateDB()
	storetest.MigrateVotes(t, s, func() {
		for {
			v, err := migrate.Down(ctx, db, ms)
			if err != nil {
				t.Fatal(err)
			}
			if v == 28 {
				return
			}
		}
	}, func() {
		if _, err := migrate.Up(ctx, db, ms); err != nil {
			t.Fatal(err)
		}
	}, func(query string) {
		if _, err := s.writer.ExecContext(ctx, query); err != nil {
			t.Fatal(err)
		}
	})
}
