package show

import (
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
)

func TestPrune(t *testing.T) {
	t.Parallel()
	r := &engine.PruneReport{Jobs: 2, Trees: 1, Tasks: 9, Logs: 40, Args: 3, Usage: 5, Audit: 6, Uploads: 1, UploadBytes: 2048,
		Files: 1, FileBytes: 10, Before: created, Orphaned: finished}
	var b strings.Builder
	Prune(&b, r, engine.PruneExpiredParams{Retention: 720 * time.Hour})
	check(t, "a pass that keeps uploads", b.String(), `deleted 2 jobs and 1 trees (older than 720h0m0s, before 2026-03-01T12:00:00Z)
deleted 9 tasks, 40 log lines and 3 task arguments
deleted 5 rows of usage and 6 audit entries (older than 720h0m0s, before 2026-03-01T12:00:00Z)
deleted 1 uploads, 2048 bytes of files (kept: retention 0)
deleted 1 files that no row names, 10 bytes (unwritten since 2026-03-01T12:01:30Z)
`)
	b.Reset()
	r.DryRun = true
	Prune(&b, r, engine.PruneExpiredParams{Retention: 720 * time.Hour, UploadRetention: time.Hour, DryRun: true})
	out := b.String()
	if !strings.HasPrefix(out, "would delete 2 jobs") || strings.Contains(out, "tasks,") || !strings.HasSuffix(out, "dry run: nothing was deleted\n") {
		t.Errorf("a dry run:\n%s", out)
	}
}
