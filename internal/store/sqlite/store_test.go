package sqlite

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore opens a fresh, migrated store on a file of its own under t's
// temporary directory.
func newStore(t *testing.T) store.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
}

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, newStore)
}

func TestOpenCreatesDirectoryAndKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a", "b", "scimesh.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	j := storetest.NewJob("j1", storetest.Epoch())
	if err := s.JobInsert(t.Context(), j); err != nil {
		t.Fatalf("JobInsert: %v", err)
	}
	if err := s.TaskInsert(t.Context(), storetest.NewTasks(j, 3)); err != nil {
		t.Fatalf("TaskInsert: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openStore(t, path)
	got, err := s.JobGet(t.Context(), "j1")
	if err != nil {
		t.Fatalf("JobGet after reopening: %v", err)
	}
	if d := storetest.JobDiff(got, j); d != "" {
		t.Errorf("job after reopening differs: %s", d)
	}
	all, err := s.TaskCountByJob(t.Context(), []string{"j1"})
	counts := all["j1"]
	if err != nil || counts.Pending != 3 {
		t.Errorf("TaskCountByJob after reopening = %+v, %v; want 3 pending", counts, err)
	}
	var mode string
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestOpenPreparesEveryStatement checks that Open leaves every statement
// of the table prepared on the writer, so that no transaction prepares one
// of its own, and that the table holds each statement once.
func TestOpenPreparesEveryStatement(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	seen := map[string]int{}
	for i, st := range statements {
		if st.id != i {
			t.Errorf("statement %d has id %d", i, st.id)
		}
		if s.stmts.cached(st) == nil {
			t.Errorf("statement %d is not prepared after Open: %s", i, st.query)
		}
		if j, ok := seen[st.query]; ok {
			t.Errorf("statements %d and %d are the same: %s", j, i, st.query)
		}
		seen[st.query] = i
	}
}
