package engine_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/testenv"
)

// TestSecondDatabaseRefusesTheBlobStore runs two databases (two SQLite
// files) on one blob directory. The first upload binds it to the first
// database. The second database's retention pass then deletes no file,
// the first's upload and an orphan included, and says why, in its error
// and in its log once however many passes; it refuses uploads, and runs
// the queue. Once the marker is removed, the second database may take the
// store over.
func TestSecondDatabaseRefusesTheBlobStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	first := newRetention(t, openStore(t))
	u := first.upload(t, 2)
	old := time.Now().Add(-2 * engine.OrphanAge)
	orphan := filepath.Join(first.dir, "files", orphanKey)
	if err := os.WriteFile(orphan, []byte("abcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{orphan, filepath.Join(first.dir, "files", u.BlobKey)} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}

	var log testenv.Buffer
	second := engine.New(openStore(t), engine.Config{Blobs: first.blobs, Retention: keepJobs, UploadRetention: keepUploads,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	r, err := second.PruneExpired(ctx, engine.PruneExpiredParams{Retention: keepJobs, UploadRetention: keepUploads})
	var foreign *blob.ForeignError
	if !errors.As(err, &foreign) || r.Files != 0 {
		t.Fatalf("the second database's pass = %+v, %v; want no file removed and a ForeignError", r, err)
	}
	for _, want := range []string{"belongs to another SciMesh database", "--blobs", "remove the marker", first.dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	for _, p := range []string{orphan, filepath.Join(first.dir, "files", u.BlobKey)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after the second database's pass: %v", err)
		}
	}
	for range 3 {
		if _, err := second.ApplyRetention(ctx); err != nil {
			t.Errorf("ApplyRetention on another database's store: %v, want the refusal logged, not returned", err)
		}
	}
	if n := strings.Count(log.String(), "belongs to another SciMesh database"); n != 1 {
		t.Errorf("the refusal was logged %d times in four passes, want once:\n%s", n, log.String())
	}
	if _, err := second.CreateUpload(ctx, strings.NewReader("id,x\na,1\n"), -1); !errors.As(err, &foreign) {
		t.Errorf("an upload to another database's store = %v, want a ForeignError", err)
	}
	if _, _, err := second.CreateJob(ctx, spec(2), ""); err != nil {
		t.Errorf("a job of hosted chunks on the second database: %v", err)
	}
	if _, err := first.e.PruneExpired(ctx, engine.PruneExpiredParams{}); err != nil {
		t.Errorf("the first database's own pass: %v", err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first database's pass left its orphan: %v", err)
	}

	// The way out the refusal names: remove the marker of a database
	// that is gone.
	if err := os.Remove(filepath.Join(first.dir, blob.MarkerName)); err != nil {
		t.Fatal(err)
	}
	if err := second.CheckBlobStore(ctx); err != nil {
		t.Fatalf("the second database's check once the marker is gone: %v", err)
	}
	if !strings.Contains(log.String(), "is this database's") {
		t.Errorf("the end of the refusal was not logged:\n%s", log.String())
	}
	if _, err := second.CreateUpload(ctx, strings.NewReader("id,x\na,1\n"), -1); err != nil {
		t.Errorf("an upload once the store is the second database's: %v", err)
	}
	if err := first.e.CheckBlobStore(ctx); !errors.As(err, &foreign) {
		t.Errorf("the first database's check of the store taken over = %v, want a ForeignError", err)
	}
}
