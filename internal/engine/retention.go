package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Retention (SPEC §7): final jobs and finished trees older than
// Config.Retention, and uploads that nothing needs for
// Config.UploadRetention, are deleted; so are files that no row names,
// if the blob store is this database's (see CheckBlobStore), and only
// those named as SciMesh names blobs.
//
// A pass deletes rows in small transactions (Config.RetentionBatch rows at
// most; job rows, which carry their final CSV, a tenth of that), so that
// it never holds SQLite's one writer for long. A job goes in two phases:
// its row first, with a purge recorded in the same transaction — from then
// on it is 404 — then its tasks' log lines, its tasks and their arguments
// in batches, and the purge last. A crash between two batches leaves the
// purge, which every pass finishes first. Files go after their rows: a
// crash between the two leaves an orphan file, which the sweep removes.
//
// Every delete is guarded by what made its row due (a job retried
// meanwhile is not final, an upload used meanwhile is not old) and
// idempotent, so passes may run in every replica at once: each row is
// deleted by one of them, and counted once, by the one that deleted it.

// RetentionObserver is told what retention removed, for metrics. An
// Observer that also implements it is told; its method is called after
// the transaction (or the file removal) that did it.
type RetentionObserver interface {
	// Deleted reports n things of kind removed — "job", "tree", "task",
	// "log" (lines), "arg" (tree task arguments), "upload", "file",
	// "usage" (rows) or "audit" (entries) —
	// and, for files, the bytes they held.
	Deleted(kind string, n int, bytes int64)
}

// Defaults of retention's settings.
const (
	// DefaultRetentionBatch is the most rows one retention transaction
	// deletes.
	DefaultRetentionBatch = 500
	// OrphanAge is how long a file (or an unfinished multipart upload)
	// must have gone unwritten before the sweep removes it when no row
	// names it: a blob being committed, or an upload being written, is
	// always younger. PruneExpiredParams.OrphanAge changes it for a pass.
	OrphanAge = time.Hour
	// retentionFirstDelay is how long after start Run makes its first
	// retention pass, so that a restart does not begin with one.
	retentionFirstDelay = time.Minute
)

// PruneExpiredParams says what one retention pass deletes.
type PruneExpiredParams struct {
	// Retention: final jobs and finished trees older than this are
	// deleted; 0 keeps them all.
	Retention time.Duration
	// UploadRetention: uploads unused for longer than this that no
	// unfinished job names are deleted; 0 keeps them all.
	UploadRetention time.Duration
	// OrphanAge replaces the default OrphanAge for this pass when
	// positive. Shorter than the longest upload's pause between two
	// writes, it would remove that upload's blob as it is written.
	OrphanAge time.Duration
	// DryRun counts what the pass would delete and deletes nothing.
	DryRun bool
}

// PruneReport is what a retention pass deleted (or, with DryRun, would
// have). A dry run does not count the tasks, log lines and arguments of
// the jobs and trees it would delete.
type PruneReport struct {
	DryRun            bool
	Jobs, Trees       int
	Tasks, Logs, Args int
	Uploads           int
	UploadBytes       int64 // of the uploads' files
	// Usage and Audit count the rows of usage and entries of the audit
	// trail older than the jobs' cutoff, deleted; a dry run counts none.
	Usage, Audit int
	Files        int // files no row names, and temporary files left behind
	FileBytes    int64
	// PurgesFinished counts the jobs and trees whose last tasks this pass
	// deleted, those of earlier passes included.
	PurgesFinished int
	// Before is the cutoff of jobs and trees (zero: kept), UploadsBefore
	// that of uploads, Orphaned that of files no row names.
	Before, UploadsBefore, Orphaned time.Time
}

// Total is the number of rows and files the pass deleted.
func (r *PruneReport) Total() int {
	return r.Jobs + r.Trees + r.Tasks + r.Logs + r.Args + r.Uploads + r.Files + r.Usage + r.Audit
}

// summary says, for the audit trail, what the pass deleted besides usage
// and the audit trail's own old entries; "" when nothing.
func (r *PruneReport) summary() string {
	if r.Total()-r.Usage-r.Audit == 0 {
		return ""
	}
	return fmt.Sprintf("%d jobs, %d trees, %d tasks, %d log lines, %d uploads, %d files (%d bytes)",
		r.Jobs, r.Trees, r.Tasks, r.Logs, r.Uploads, r.Files, r.FileBytes+r.UploadBytes)
}

// ApplyRetention makes one pass with the engine's configured retention
// (Config.Retention and Config.UploadRetention) and returns how many rows
// and files it deleted.
func (e *Engine) ApplyRetention(ctx context.Context) (int, error) {
	r, err := e.PruneExpired(ctx, PruneExpiredParams{Retention: e.cfg.Retention, UploadRetention: e.cfg.UploadRetention})
	var foreign *blob.ForeignError
	if errors.As(err, &foreign) {
		err = nil // CheckBlobStore logged it once; not at every pass
	}
	if r == nil {
		return 0, err
	}
	if n := r.Total(); n > 0 {
		e.log.InfoContext(ctx, "retention pass", "jobs", r.Jobs, "trees", r.Trees, "tasks", r.Tasks, "log_lines", r.Logs,
			"uploads", r.Uploads, "files", r.Files, "file_bytes", r.FileBytes+r.UploadBytes, "usage_rows", r.Usage, "audit_entries", r.Audit)
	}
	return r.Total(), err
}

// PruneExpired makes one retention pass now: it deletes the final jobs and
// finished trees older than p.Retention with their tasks, logs, results
// and arguments, the usage and audit entries older than p.Retention, the
// uploads unused for p.UploadRetention that no unfinished job names with
// their files, and the files no row names. It also finishes every
// deletion a crashed or concurrent pass left under way. With p.DryRun it
// deletes nothing and reports what it would delete. A pass that deleted
// anything but usage and old audit entries says so in the audit trail
// (and each job and upload it deleted), as the coordinator's.
//
// Files are swept last, and only in a blob store bound to this database:
// a store bound to another is not swept, and the pass returns its
// *blob.ForeignError once the rest is done. A pass, a dry run too, binds
// a store that is bound to none yet.
func (e *Engine) PruneExpired(ctx context.Context, p PruneExpiredParams) (*PruneReport, error) {
	r, err := e.pruneExpired(ctx, p)
	if r == nil || r.DryRun || r.summary() == "" {
		return r, err
	}
	if aerr := e.tx(ctx, func(q store.Querier) error {
		return e.auditAs(ctx, q, coordinatorAccount, actionPrune, "", r.summary())
	}); aerr != nil && err == nil {
		err = aerr
	}
	return r, err
}

func (e *Engine) pruneExpired(ctx context.Context, p PruneExpiredParams) (*PruneReport, error) {
	if p.Retention < 0 || p.UploadRetention < 0 {
		return nil, domain.Invalidf("retention %v and upload retention %v must not be negative; 0 keeps everything",
			p.Retention, p.UploadRetention)
	}
	now := e.now()
	r := &PruneReport{DryRun: p.DryRun}
	if p.Retention > 0 {
		r.Before = now.Add(-p.Retention)
		if err := e.pruneJobs(ctx, r); err != nil {
			return r, err
		}
		if err := e.pruneTrees(ctx, r); err != nil {
			return r, err
		}
		if !p.DryRun {
			if err := e.pruneAccounting(ctx, r); err != nil {
				return r, err
			}
		}
	}
	if !p.DryRun {
		if err := e.finishPurges(ctx, r); err != nil {
			return r, err
		}
	}
	if p.UploadRetention > 0 {
		r.UploadsBefore = now.Add(-p.UploadRetention)
		if err := e.pruneUploads(ctx, r); err != nil {
			return r, err
		}
	}
	if e.cfg.Blobs != nil {
		// Only this database's store: the sweep removes what no row of
		// this database names.
		if err := e.CheckBlobStore(ctx); err != nil {
			return r, fmt.Errorf("sweep files no upload names: %w", err)
		}
		// Leftovers are aged by the blob store's clock, which wrote their
		// times (a file's, or the last part of an unfinished multipart
		// upload), not by the engine's.
		age := OrphanAge
		if p.OrphanAge > 0 {
			age = p.OrphanAge
		}
		r.Orphaned = time.Now().Add(-age)
		if err := e.sweepFiles(ctx, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (e *Engine) retentionBatch() int {
	if e.cfg.RetentionBatch > 0 {
		return e.cfg.RetentionBatch
	}
	return DefaultRetentionBatch
}

// observeDeleted tells the RetentionObserver, if any.
func (e *Engine) observeDeleted(kind string, n int, bytes int64) {
	if o, ok := e.cfg.Observer.(RetentionObserver); ok && (n > 0 || bytes > 0) {
		o.Deleted(kind, n, bytes)
	}
}

// pruneJobs deletes the rows of the final jobs finished before r.Before,
// recording a purge of each, in batches.
func (e *Engine) pruneJobs(ctx context.Context, r *PruneReport) error {
	batch := max(e.retentionBatch()/10, 1) // job rows carry their final CSV
	var after *store.ExpiredCursor
	for {
		jobs, err := e.store.JobListExpired(ctx, &store.JobListExpiredParams{Before: r.Before, After: after, Limit: batch})
		if err != nil {
			return mapStoreErr(fmt.Errorf("list expired jobs: %w", err))
		}
		if len(jobs) == 0 {
			return nil
		}
		last := jobs[len(jobs)-1]
		after = &store.ExpiredCursor{At: last.FinishedAt, ID: last.ID}
		if r.DryRun {
			r.Jobs += len(jobs)
		} else {
			ids := make([]string, len(jobs))
			for i, j := range jobs {
				ids[i] = j.ID
			}
			var deleted []store.ExpiredJob
			err := e.tx(ctx, func(q store.Querier) error {
				var err error
				now := e.now()
				deleted, err = q.JobDelete(ctx, &store.JobDeleteParams{IDs: ids, Before: r.Before, Now: now})
				if err != nil || len(deleted) == 0 {
					return err
				}
				entries := make([]*store.AuditEntry, len(deleted))
				for i, j := range deleted {
					entries[i] = &store.AuditEntry{At: now, Account: coordinatorAccount, Action: actionJobDelete, Target: j.ID,
						Detail: "retention: final since " + j.FinishedAt.Format(time.RFC3339)}
				}
				return q.AuditInsert(ctx, entries)
			})
			if err != nil {
				return fmt.Errorf("delete %d expired jobs: %w", len(ids), err)
			}
			e.jobsMu.Lock()
			for _, j := range deleted {
				delete(e.jobs, j.ID)
			}
			e.jobsMu.Unlock()
			r.Jobs += len(deleted)
			e.observeDeleted("job", len(deleted), 0)
		}
		if len(jobs) < batch {
			return nil
		}
	}
}

// pruneTrees records a purge of every tree finished before r.Before.
func (e *Engine) pruneTrees(ctx context.Context, r *PruneReport) error {
	batch := e.retentionBatch()
	var after *store.ExpiredCursor
	seen := map[string]bool{} // a tree's tasks are walked one by one
	for {
		walked, err := e.store.TaskTreeListExpired(ctx, &store.TaskTreeListExpiredParams{Before: r.Before, After: after, Limit: batch})
		if err != nil {
			return mapStoreErr(fmt.Errorf("list finished trees: %w", err))
		}
		if len(walked) == 0 {
			return nil
		}
		after = &walked[len(walked)-1].After
		var ids []string
		for _, w := range walked {
			if !seen[w.ID] {
				seen[w.ID] = true
				ids = append(ids, w.ID)
			}
		}
		if r.DryRun {
			r.Trees += len(ids)
		} else if len(ids) > 0 {
			var purged []string
			err := e.tx(ctx, func(q store.Querier) error {
				var err error
				purged, err = q.TaskTreeDelete(ctx, &store.TaskTreeDeleteParams{IDs: ids, Before: r.Before, Now: e.now()})
				return err
			})
			if err != nil {
				return fmt.Errorf("delete %d finished trees: %w", len(ids), err)
			}
			r.Trees += len(purged)
			e.observeDeleted("tree", len(purged), 0)
		}
		if len(walked) < batch {
			return nil
		}
	}
}

// finishPurges deletes the tasks, logs and arguments of every job and
// tree whose purge is recorded, then the purges.
func (e *Engine) finishPurges(ctx context.Context, r *PruneReport) error {
	done := map[string]bool{}
	for {
		purges, err := e.store.PurgeList(ctx, 100)
		if err != nil {
			return mapStoreErr(fmt.Errorf("list purges under way: %w", err))
		}
		progress := false
		for _, p := range purges {
			if done[p.ID] {
				continue // another process is ending it; not ours to wait for
			}
			done[p.ID] = true
			progress = true
			if err := e.purge(ctx, p, r); err != nil {
				return err
			}
		}
		if !progress {
			return nil
		}
	}
}

// purge deletes one purge's tasks in batches: each batch's log lines
// first (they are found through their tasks), then the tasks and their
// arguments; the purge goes once no task is left.
func (e *Engine) purge(ctx context.Context, p store.Purge, r *PruneReport) error {
	batch := e.retentionBatch()
	for {
		ids, err := e.store.TaskListIDs(ctx, &store.TaskListIDsParams{JobID: p.ID, Limit: batch})
		if err != nil {
			return mapStoreErr(fmt.Errorf("list the tasks of %s %s: %w", p.Kind, p.ID, err))
		}
		if len(ids) == 0 {
			if err := e.tx(ctx, func(q store.Querier) error { return q.PurgeDelete(ctx, p.ID) }); err != nil {
				return fmt.Errorf("end the purge of %s %s: %w", p.Kind, p.ID, err)
			}
			r.PurgesFinished++
			return nil
		}
		for {
			var n int
			err := e.tx(ctx, func(q store.Querier) error {
				var err error
				n, err = q.TaskLogDelete(ctx, &store.TaskLogDeleteParams{TaskIDs: ids, Limit: batch})
				return err
			})
			if err != nil {
				return fmt.Errorf("delete the logs of %s %s: %w", p.Kind, p.ID, err)
			}
			r.Logs += n
			e.observeDeleted("log", n, 0)
			if n < batch {
				break
			}
		}
		var d store.TaskDeleted
		err = e.tx(ctx, func(q store.Querier) error {
			var err error
			d, err = q.TaskDelete(ctx, &store.TaskDeleteParams{IDs: ids})
			return err
		})
		if err != nil {
			return fmt.Errorf("delete the tasks of %s %s: %w", p.Kind, p.ID, err)
		}
		r.Tasks += d.Tasks
		r.Args += d.Args
		e.observeDeleted("task", d.Tasks, 0)
		e.observeDeleted("arg", d.Args, 0)
	}
}

// pruneUploads deletes the uploads that nothing needs since
// r.UploadsBefore, each row then its file.
func (e *Engine) pruneUploads(ctx context.Context, r *PruneReport) error {
	batch := e.retentionBatch()
	var after *store.ExpiredCursor
	for {
		ups, err := e.store.UploadListExpired(ctx, &store.UploadListExpiredParams{Before: r.UploadsBefore, After: after, Limit: batch})
		if err != nil {
			return mapStoreErr(fmt.Errorf("list expired uploads: %w", err))
		}
		if len(ups) == 0 {
			return nil
		}
		last := ups[len(ups)-1]
		after = &store.ExpiredCursor{At: last.CreatedAt, ID: last.ID}
		for _, u := range ups {
			if r.DryRun {
				r.Uploads++
				r.UploadBytes += u.BlobBytes
				continue
			}
			var ok bool
			err := e.tx(ctx, func(q store.Querier) error {
				var err error
				ok, err = q.UploadDelete(ctx, &store.UploadDeleteParams{ID: u.ID, Before: r.UploadsBefore})
				if err != nil || !ok {
					return err
				}
				return e.auditAs(ctx, q, coordinatorAccount, actionUploadDelete, u.ID, "retention: unused since "+r.UploadsBefore.Format(time.RFC3339))
			})
			if err != nil {
				return fmt.Errorf("delete upload %s: %w", u.ID, err)
			}
			if !ok {
				continue // used meanwhile, or deleted by another process
			}
			r.Uploads++
			e.observeDeleted("upload", 1, 0)
			if e.cfg.Blobs == nil {
				continue
			}
			// Another upload naming the same file keeps it.
			if named, err := e.store.UploadListBlobKeys(ctx, []string{u.BlobKey}); err != nil || len(named) > 0 {
				continue // the sweep decides later, if need be
			}
			if err := e.cfg.Blobs.Remove(ctx, u.BlobKey); err != nil {
				return fmt.Errorf("remove the file of upload %s: %w", u.ID, err)
			}
			r.UploadBytes += u.BlobBytes
			e.observeDeleted("file", 1, u.BlobBytes)
		}
		if len(ups) < batch {
			return nil
		}
	}
}

// pruneAccounting deletes the usage and the audit entries older than
// r.Before, in batches.
func (e *Engine) pruneAccounting(ctx context.Context, r *PruneReport) error {
	batch := e.retentionBatch()
	for _, d := range []struct {
		kind string // for the RetentionObserver
		n    *int
		del  func(q store.Querier) (int, error)
	}{
		{"usage", &r.Usage, func(q store.Querier) (int, error) {
			return q.UsageDelete(ctx, &store.UsageDeleteParams{Before: r.Before, Limit: batch})
		}},
		{"audit", &r.Audit, func(q store.Querier) (int, error) {
			return q.AuditDelete(ctx, &store.AuditDeleteParams{Before: r.Before, Limit: batch})
		}},
	} {
		for {
			var n int
			err := e.tx(ctx, func(q store.Querier) error {
				var err error
				n, err = d.del(q)
				return err
			})
			if err != nil {
				return fmt.Errorf("delete old %s rows: %w", d.kind, err)
			}
			*d.n += n
			e.observeDeleted(d.kind, n, 0)
			if n < batch {
				break
			}
		}
	}
	return nil
}

// sweepFiles removes the blobs that no upload names and the temporary
// files, both when last written before r.Orphaned.
func (e *Engine) sweepFiles(ctx context.Context, r *PruneReport) error {
	remove := func(i blob.Info, rm func(context.Context, string) error) error {
		if !r.DryRun {
			if err := rm(ctx, i.Key); err != nil {
				return err
			}
			e.observeDeleted("file", 1, i.Size)
		}
		r.Files++
		r.FileBytes += i.Size
		return nil
	}
	err := e.cfg.Blobs.List(ctx, func(page []blob.Info) error {
		var old []blob.Info
		keys := make([]string, 0, len(page))
		for _, i := range page {
			if i.ModTime.Before(r.Orphaned) {
				old = append(old, i)
				keys = append(keys, i.Key)
			}
		}
		if len(old) == 0 {
			return nil
		}
		named, err := e.store.UploadListBlobKeys(ctx, keys)
		if err != nil {
			return mapStoreErr(fmt.Errorf("look up the files' uploads: %w", err))
		}
		for _, i := range old {
			if slices.Contains(named, i.Key) {
				continue
			}
			if err := remove(i, e.cfg.Blobs.Remove); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("sweep files no upload names: %w", err)
	}
	err = e.cfg.Blobs.ListTemp(ctx, func(page []blob.Info) error {
		for _, i := range page {
			if i.ModTime.Before(r.Orphaned) {
				if err := remove(i, e.cfg.Blobs.RemoveTemp); err != nil {
					return err
				}
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("sweep temporary files: %w", err)
	}
	return nil
}

// retentionLoop makes a pass retentionFirstDelay after start (or after
// one interval, if shorter), then every interval, until ctx is done.
func (e *Engine) retentionLoop(ctx context.Context) {
	first := time.NewTimer(min(retentionFirstDelay, e.cfg.RetentionInterval))
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.C:
	}
	e.loop(ctx, "retention", e.cfg.RetentionInterval, nil, e.ApplyRetention)
}
