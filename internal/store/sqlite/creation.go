package sqlite

import (
	"context"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// A job created in batches: hidden (creating) until done, renewed by each
// batch, and deleted in steps when its creation died.
var (
	jobUpdateCreationSQL = `UPDATE jobs SET updated_at = ?2, creating = NOT ?3, version = version + 1
	WHERE id = ?1 AND creating AND status <> 'cancelled'`
	jobListAbandonedSQL = `SELECT ` + jobSelectCols + ` FROM jobs INDEXED BY jobs_creating
	WHERE creating AND (updated_at < ?1 OR status = 'cancelled') ORDER BY updated_at LIMIT ?2`
	jobAbandonSQL = `UPDATE jobs SET status = 'cancelled', error = 'its creation stopped before it was whole',
	version = version + 1
	WHERE id = ?1 AND creating AND (updated_at < ?2 OR status = 'cancelled')`
	abandonedLogsDeleteSQL = `DELETE FROM task_logs WHERE task_id IN (
	SELECT id FROM tasks WHERE job_id = ?1 ORDER BY job_id, kind, chunk_index LIMIT ?2)`
	abandonedTasksDeleteSQL = `DELETE FROM tasks WHERE rowid IN (
	SELECT rowid FROM tasks WHERE job_id = ?1 ORDER BY job_id, kind, chunk_index LIMIT ?2)`
	abandonedJobDeleteSQL = `DELETE FROM jobs WHERE id = ?1 AND creating`
)

// JobUpdateCreation renews or ends the creation of job p.ID.
func (q *querier) JobUpdateCreation(ctx context.Context, p *store.JobUpdateCreationParams) error {
	res, err := q.exec(ctx, jobUpdateCreationSQL, p.ID, timeArg(p.Now), boolArg(p.Done))
	if err != nil {
		return fmt.Errorf("sqlite: record the creation of job %s: %w", p.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("sqlite: record the creation of job %s: it is gone, whole or abandoned: %w", p.ID, store.ErrNotFound)
	}
	return nil
}

// JobListAbandoned returns jobs whose creation died.
func (q *querier) JobListAbandoned(ctx context.Context, p *store.JobListAbandonedParams) ([]*domain.Job, error) {
	var out []*domain.Job
	err := q.query(ctx, false, func(r scanner) error {
		j, err := scanJob(r)
		out = append(out, j)
		return err
	}, jobListAbandonedSQL, timeArg(p.Before), max(p.Limit, 1))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list abandoned jobs: %w", err)
	}
	return out, nil
}

// JobDeleteAbandoned deletes one step of an abandoned job.
func (q *querier) JobDeleteAbandoned(ctx context.Context, p *store.JobDeleteAbandonedParams) (bool, error) {
	limit := max(p.Limit, 1)
	gone := false
	step := func(q *querier) error {
		res, err := q.exec(ctx, jobAbandonSQL, p.ID, timeArg(p.Before))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("it is not creating, or its creation went on: %w", store.ErrNotFound)
		}
		if _, err := q.exec(ctx, abandonedLogsDeleteSQL, p.ID, limit); err != nil {
			return err
		}
		res, err = q.exec(ctx, abandonedTasksDeleteSQL, p.ID, limit)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n >= int64(limit) {
			return err
		}
		if _, err := q.exec(ctx, abandonedJobDeleteSQL, p.ID); err != nil {
			return err
		}
		gone = true
		return nil
	}
	var err error
	if q.tx != nil {
		err = step(q)
	} else {
		err = q.atomically(ctx, "job_delete_abandoned", step)
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: delete abandoned job %s: %w", p.ID, err)
	}
	return gone, nil
}
