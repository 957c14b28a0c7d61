package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// DefaultStitchLease is the default of Config.StitchLease.
const DefaultStitchLease = 60 * time.Second

// The stitcher reads a job's chunk outputs in pages by chunk index, each
// of about stitchPageBytes (the first of stitchFirstPage outputs, then as
// many as the outputs seen so far suggest, 1 to stitchMaxPage), so that
// it holds at most a page and the best top_k rows, whatever the number of
// chunks.
const (
	stitchPageBytes = 4 << 20
	stitchFirstPage = 8
	stitchMaxPage   = 256
)

// StitchReadyJobs leases stitch tasks whose chunks all completed, merges each
// job's chunk outputs into its final CSV and completes the job. It returns
// how many jobs it completed or failed.
//
// A stitch is the coordinators' own work: its lease lasts
// Config.StitchLease (not the job's lease_seconds, which is the workers')
// and is renewed while the merge runs; a lease that runs out (this process
// killed or cut off) lets any process take the stitch again, and never
// spends the job's max_attempts. Only outputs that cannot be merged fail
// the job.
func (e *Engine) StitchReadyJobs(ctx context.Context) (int, error) {
	n := 0
	for {
		// One at a time: a stitch leased now but merged after others
		// would see its lease run out before its renewals begin.
		var task *domain.Task
		start := time.Now()
		err := e.tx(ctx, func(q store.Querier) error {
			task = nil
			now := e.now()
			tasks, err := q.TaskClaim(ctx, &store.TaskClaimParams{
				Owners: []string{e.cfg.NodeID}, Kinds: []domain.TaskKind{domain.KindStitch}, Now: now,
			})
			if err != nil || len(tasks) == 0 {
				return err
			}
			// The claim leased it for the job's lease_seconds; a stitch
			// has a lease of its own.
			t := tasks[0]
			t.LeaseExpiresAt, t.UpdatedAt = now.Add(e.cfg.StitchLease), now
			if err := q.TaskUpdate(ctx, t); err != nil {
				return err
			}
			task = t
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("lease stitch tasks: %w", err)
		}
		if task == nil {
			return n, nil
		}
		e.cfg.Observer.Claimed(domain.KindStitch, 1, time.Since(start))
		ok, err := e.stitchJob(ctx, task)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
}

// mergeFault is an error of the chunk outputs themselves (they cannot be
// merged: headers differ, a stored output is invalid, outputs are
// missing). Merging them again would fail the same way, so it fails the
// job; any other error of a stitch only gives its lease back.
type mergeFault struct{ err error }

// Error says that the outputs cannot be merged, and why; a data error's
// "invalid argument: " is left out, since the job's caller sent no
// argument wrong.
func (f *mergeFault) Error() string {
	why := strings.TrimPrefix(f.err.Error(), domain.ErrInvalidArgument.Error()+": ")
	return "the chunk outputs cannot be merged into the final CSV: " + why
}
func (f *mergeFault) Unwrap() error { return f.err }

// stitchJob merges the outputs of t's job and records the final CSV,
// fenced by t's lease so that a slow stitcher whose lease expired writes
// nothing. It renews the lease while it merges, and stops merging when the
// lease is lost.
func (e *Engine) stitchJob(ctx context.Context, t *domain.Task) (bool, error) {
	start := time.Now()
	job, err := e.jobSettings(ctx, t.JobID)
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			return false, nil // deleted since: its tasks went with it
		}
		e.releaseStitch(ctx, t, "stitch interrupted: "+err.Error())
		return false, err
	}

	e.log.InfoContext(ctx, "stitch started", "job_id", t.JobID, "task_id", t.ID, "attempt", t.Attempt, "chunks", job.ChunkCount)
	mctx, stop := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { e.keepStitchLease(mctx, t, stop) })
	var buf bytes.Buffer
	chunks, rows, mergeErr := e.mergeOutputs(mctx, job, &buf)
	lost := context.Cause(mctx)
	stop(nil)
	wg.Wait()

	var fault *mergeFault
	switch {
	case mergeErr == nil, errors.As(mergeErr, &fault):
	case lost != nil && ctx.Err() == nil:
		// Another process has the stitch now, or the job is over.
		e.log.InfoContext(ctx, "stitch stopped", "job_id", t.JobID, "task_id", t.ID, "reason", lost)
		return false, nil
	default:
		// Not the outputs' fault (the database, or this process stopping):
		// give the stitch back, for any process to take at once.
		e.releaseStitch(ctx, t, "stitch interrupted: "+mergeErr.Error())
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("stitch job %s: %w", t.JobID, mergeErr)
	}
	sum := sha256.Sum256(buf.Bytes())

	var finished *domain.Job
	err = e.tx(ctx, func(q store.Querier) error {
		finished = nil
		root, err := q.TaskGet(ctx, t.ID)
		if err != nil {
			return err
		}
		now := e.now()
		if err := domain.CheckLease(root, e.cfg.NodeID, t.Attempt, now); err != nil {
			return nil // the job was cancelled or failed, or our lease expired
		}
		j, err := q.JobGet(ctx, t.JobID)
		if err != nil {
			return err
		}
		if j.Status.Final() {
			return nil
		}
		if mergeErr != nil {
			finished = j
			return e.endAttempt(ctx, q, root, mergeErr.Error(), false, now)
		}
		if _, err := domain.Complete(root, e.cfg.NodeID, t.Attempt, sum[:], nil, now); err != nil {
			return err
		}
		if err := q.TaskUpdate(ctx, root); err != nil {
			return err
		}
		j.Result = buf.Bytes()
		j.ResultSHA256 = hex.EncodeToString(sum[:])
		domain.FinishJob(j, domain.JobCompleted, "", now)
		finished = j
		return q.JobUpdate(ctx, j)
	})
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stitch job %s: %w", t.JobID, err)
	}
	if finished == nil {
		return false, nil
	}
	e.jobEnded(t.JobID)
	if mergeErr != nil {
		e.cfg.Observer.Failed(domain.KindStitch, true)
		e.log.Error("stitch failed", "job_id", t.JobID, "task_id", t.ID, "error", mergeErr)
		return true, nil
	}
	e.cfg.Observer.Completed(domain.KindStitch, 1)
	e.log.InfoContext(ctx, "job completed", "job_id", t.JobID, "chunks", chunks, "rows", rows,
		"bytes", buf.Len(), "stitch_ms", time.Since(start).Milliseconds())
	return true, nil
}

// mergeOutputs writes to w the final CSV of job, reading its chunk
// outputs page by page by chunk index, and returns how many chunk outputs
// it read and how many rows it wrote. An error of the outputs is a
// *mergeFault; any other (the database's, ctx's) is not.
func (e *Engine) mergeOutputs(ctx context.Context, job *domain.Job, w *bytes.Buffer) (chunks, rows int, err error) {
	m, err := table.NewMerger(job.ScoreColumn, job.Order, job.TopK)
	if err != nil {
		return 0, 0, &mergeFault{err}
	}
	chunks, err = e.readOutputs(ctx, job, m.Add)
	if err != nil {
		return chunks, 0, err
	}
	if chunks != job.ChunkCount {
		return chunks, 0, &mergeFault{fmt.Errorf("job %s has %d completed chunk outputs of %d", job.ID, chunks, job.ChunkCount)}
	}
	rows, err = e.finishMerge(ctx, job, m, w)
	return chunks, rows, err
}

// readOutputs hands the outputs of job's completed chunks to add, reading
// them page by page by chunk index, and returns how many it read. An
// error of add is a *mergeFault.
func (e *Engine) readOutputs(ctx context.Context, job *domain.Job, add func(table.ChunkOutput) error) (chunks int, err error) {
	after, limit := -1, stitchFirstPage
	for page := 0; ; page++ {
		if ctx.Err() != nil {
			return chunks, context.Cause(ctx)
		}
		outs, err := e.store.TaskResultList(ctx, &store.TaskResultListParams{JobID: job.ID, AfterIndex: after, Limit: limit})
		if err != nil {
			if ctx.Err() != nil {
				return chunks, context.Cause(ctx)
			}
			return chunks, mapStoreErr(fmt.Errorf("read chunk outputs of job %s after chunk %d: %w", job.ID, after, err))
		}
		size := 0
		for i := range outs {
			size += len(outs[i].Result)
			if err := add(table.ChunkOutput{Index: outs[i].ChunkIndex, Data: outs[i].Result}); err != nil {
				return chunks, &mergeFault{err}
			}
			outs[i].Result = nil // merged: let it go before the next page
			chunks++
		}
		if e.stitchPageHook != nil {
			e.stitchPageHook(job.ID, page)
		}
		if len(outs) < limit {
			return chunks, nil
		}
		after = outs[len(outs)-1].ChunkIndex
		limit = min(max(e.pageBytes/max(size/len(outs), 1), 1), stitchMaxPage)
	}
}

// finishMerge joins job's input columns, if it has any, to the rows m
// kept, and writes them to w as the final CSV does; it returns how many
// rows it wrote. An error of the data is a *mergeFault.
func (e *Engine) finishMerge(ctx context.Context, job *domain.Job, m *table.Merger, w *bytes.Buffer) (int, error) {
	if len(job.Columns) > 0 {
		if err := m.Join(job.IDColumn, job.Columns, e.chunkLookup(ctx, job)); err != nil {
			if errors.Is(err, domain.ErrInvalidArgument) {
				return 0, &mergeFault{err}
			}
			return 0, fmt.Errorf("join the input columns of job %s: %w", job.ID, err)
		}
	}
	rows, err := m.Finish(w)
	if err != nil {
		return 0, &mergeFault{err}
	}
	return rows, nil
}

// keepStitchLease renews this process's lease on the stitch t every third
// of Config.StitchLease until ctx is done. When the lease is lost (taken
// over after it ran out, or the job ended) or cannot be renewed before it
// runs out, it calls lost with why, which stops the merge.
func (e *Engine) keepStitchLease(ctx context.Context, t *domain.Task, lost context.CancelCauseFunc) {
	tick := time.NewTicker(max(e.cfg.StitchLease/3, time.Millisecond))
	defer tick.Stop()
	expires := t.LeaseExpiresAt
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var renewed time.Time
		err := e.tx(ctx, func(q store.Querier) error {
			root, err := q.TaskGet(ctx, t.ID)
			if err != nil {
				return err
			}
			now := e.now()
			if err := domain.CheckLease(root, e.cfg.NodeID, t.Attempt, now); err != nil {
				return err
			}
			root.LeaseExpiresAt, root.UpdatedAt = now.Add(e.cfg.StitchLease), now
			renewed = root.LeaseExpiresAt
			return q.TaskUpdate(ctx, root)
		})
		switch {
		case err == nil:
			expires = renewed
		case ctx.Err() != nil:
			return
		case errors.Is(err, domain.ErrLeaseLost), errors.Is(err, domain.ErrCancelled), errors.Is(err, domain.ErrNotFound):
			lost(fmt.Errorf("stitch lease of task %s attempt %d lost: %w", t.ID, t.Attempt, err))
			return
		case !e.now().Before(expires):
			lost(fmt.Errorf("stitch lease of task %s attempt %d ran out, renewals failing: %w", t.ID, t.Attempt, err))
			return
		default:
			e.log.WarnContext(ctx, "renewing a stitch lease failed; retrying", "task_id", t.ID, "job_id", t.JobID, "error", err)
		}
	}
}

// releaseStitch gives the stitch t back (pending, for any process to take
// at once, without spending an attempt) if this process still holds its
// lease. It runs even when ctx is done, so that a coordinator that stops
// does not leave the stitch to wait for its lease to run out.
func (e *Engine) releaseStitch(ctx context.Context, t *domain.Task, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := e.tx(ctx, func(q store.Querier) error {
		root, err := q.TaskGet(ctx, t.ID)
		if err != nil {
			return err
		}
		now := e.now()
		if domain.CheckLease(root, e.cfg.NodeID, t.Attempt, now) != nil {
			return nil
		}
		domain.Release(root, reason, now)
		return q.TaskUpdate(ctx, root)
	})
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		e.log.WarnContext(ctx, "giving a stitch back failed; it is taken again when its lease runs out",
			"task_id", t.ID, "job_id", t.JobID, "error", err)
	}
}
