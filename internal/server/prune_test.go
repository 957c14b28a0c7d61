package server

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store/sqlite"
)

// TestPrune: a pass refuses a database that is not there, creating none,
// and runs on one that is.
func TestPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "scimesh.db")
	p := engine.PruneExpiredParams{Retention: time.Hour, UploadRetention: time.Hour, OrphanAge: time.Hour, DryRun: true}
	if _, err := Prune(t.Context(), "sqlite:"+db, "", filepath.Join(dir, "data"), p); err == nil || !strings.Contains(err.Error(), "existing database") {
		t.Fatalf("Prune of a missing database: %v, want refused", err)
	}
	if made, _ := filepath.Glob(db + "*"); len(made) != 0 {
		t.Fatalf("the refused pass made %v", made)
	}
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	r, err := Prune(t.Context(), "sqlite:"+db, "", filepath.Join(dir, "data"), p)
	if err != nil || r == nil || !r.DryRun || r.Total() != 0 {
		t.Fatalf("Prune of an empty database: %+v, %v; want a dry run that deletes nothing", r, err)
	}
}
