package sqlite

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenExistingRefusesWhatIsNoDatabase: a missing file (in a missing
// directory), an empty file and another application's SQLite database are
// each refused with ErrNoDatabase and left as they were; a SciMesh
// database, with its installation ID, opens.
func TestOpenExistingRefusesWhatIsNoDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nowhere", "x.db")
	if _, err := OpenExisting(t.Context(), missing); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenExisting of a missing file = %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenExisting of a missing file made its directory: %v", err)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(t.Context(), empty); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenExisting of an empty file = %v, want ErrNoDatabase", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("OpenExisting wrote to an empty file: %v, %v", fi, err)
	}

	theirs := filepath.Join(dir, "theirs.db")
	db, err := sql.Open("sqlite", theirs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenExisting(t.Context(), theirs); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenExisting of another application's database = %v, want ErrNoDatabase", err)
	}
	db, err = sql.Open("sqlite", theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table'`).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("another application's database has %d tables (%v) after OpenExisting, want its one", tables, err)
	}

	ours := filepath.Join(dir, "ours.db")
	s := openStore(t, ours)
	id, err := s.InstallationGet(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	again, err := OpenExisting(t.Context(), ours)
	if err != nil {
		t.Fatalf("OpenExisting of a SciMesh database: %v", err)
	}
	defer again.Close()
	if got, err := again.InstallationGet(t.Context()); err != nil || got != id {
		t.Errorf("the installation ID read again = %q, %v; want %q", got, err, id)
	}
}
