package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// stitchBatch bounds the stitch tasks one process leases per pass.
const stitchBatch = 4

// StitchReady leases stitch tasks whose chunks all completed, merges each
// job's chunk outputs into its final CSV and completes the job. It returns
// how many jobs it completed or failed.
func (e *Engine) StitchReady(ctx context.Context) (int, error) {
	n := 0
	for {
		var tasks []*domain.Task
		start := time.Now()
		err := e.tx(ctx, func(q store.Querier) error {
			var err error
			tasks, err = q.TaskClaim(ctx, &store.TaskClaimParams{
				Owner: e.cfg.NodeID, Kinds: []domain.TaskKind{domain.KindStitch}, Max: stitchBatch, Now: e.now(),
			})
			return err
		})
		if err != nil {
			return n, fmt.Errorf("lease stitch tasks: %w", err)
		}
		e.cfg.Observer.Claimed(domain.KindStitch, len(tasks), time.Since(start))
		for _, t := range tasks {
			ok, err := e.stitchJob(ctx, t)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
		if len(tasks) < stitchBatch {
			return n, nil
		}
	}
}

// stitchJob merges the outputs of t's job and records the final CSV, fenced
// by t's lease so that a slow stitcher whose lease expired writes nothing.
func (e *Engine) stitchJob(ctx context.Context, t *domain.Task) (bool, error) {
	start := time.Now()
	job, err := e.jobSettings(ctx, t.JobID)
	if err != nil {
		return false, err
	}
	results, err := e.store.TaskResults(ctx, t.JobID)
	if err != nil {
		return false, mapStoreErr(fmt.Errorf("read chunk outputs of job %s: %w", t.JobID, err))
	}
	chunks := make([]table.ChunkOutput, len(results))
	for i, r := range results {
		chunks[i] = table.ChunkOutput{Index: r.ChunkIndex, Data: r.Result}
	}
	var buf bytes.Buffer
	rows, mergeErr := table.Merge(&buf, chunks, job.ScoreColumn, job.Order, job.TopK)
	if mergeErr == nil && len(results) != job.ChunkCount {
		mergeErr = fmt.Errorf("job %s has %d completed chunk outputs of %d", job.ID, len(results), job.ChunkCount)
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
			return e.endAttempt(ctx, q, root, "stitch: "+mergeErr.Error(), false, now)
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
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stitch job %s: %w", t.JobID, err)
	}
	if finished == nil {
		return false, nil
	}
	if mergeErr != nil {
		e.cfg.Observer.Failed(domain.KindStitch, true)
		e.log.Error("stitch failed", "job_id", t.JobID, "task_id", t.ID, "error", mergeErr)
		return true, nil
	}
	e.cfg.Observer.Completed(domain.KindStitch, 1)
	e.log.InfoContext(ctx, "job completed", "job_id", t.JobID, "chunks", len(results), "rows", rows,
		"bytes", buf.Len(), "stitch_ms", time.Since(start).Milliseconds())
	return true, nil
}
