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
	sqlJobUpdateCreation = newStatement(`UPDATE jobs SET updated_at = ?2, creating = NOT ?3, version = version + 1
	WHERE id = ?1 AND creating AND status <> 'cancelled'`)
	sqlJobListAbandoned = newStatement(`SELECT ` + jobSelectColumns + ` FROM jobs INDEXED BY jobs_creating
	WHERE creating AND (updated_at < ?1 OR status = 'cancelled') ORDER BY updated_at LIMIT ?2`)
	sqlJobAbandon = newStatement(`UPDATE jobs SET status = 'cancelled', error = 'its creation stopped before it was whole',
	version = version + 1
	WHERE id = ?1 AND creating AND (updated_at < ?2 OR status = 'cancelled')`)
	sqlAbandonedLogsDelete = newStatement(`DELETE FROM task_logs WHERE task_id IN (
	SELECT id FROM tasks WHERE job_id = ?1 ORDER BY job_id, kind, chunk_index LIMIT ?2)`)
	sqlAbandonedTasksDelete = newStatement(`DELETE FROM tasks WHERE rowid IN (
	SELECT rowid FROM tasks WHERE job_id = ?1 ORDER BY job_id, kind, chunk_index LIMIT ?2)`)
	sqlAbandonedJobDelete = newStatement(`DELETE FROM jobs WHERE id = ?1 AND creating`)
)

// JobUpdateCreation renews or ends the creation of job p.ID.
func (q *querier) JobUpdateCreation(ctx context.Context, p *store.JobUpdateCreationParams) error {
	res, err := q.exec(ctx, sqlJobUpdateCreation, p.ID, timeArg(p.Now), boolArg(p.Done))
	if err != nil {
		return translate(err, "record the creation of job %s", p.ID)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return translate(store.ErrNotFound, "record the creation of job %s: it is gone, whole or abandoned", p.ID)
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
	}, sqlJobListAbandoned, timeArg(p.Before), max(p.Limit, 1))
	if err != nil {
		return nil, translate(err, "list abandoned jobs")
	}
	return out, nil
}

// JobDeleteAbandoned deletes one step of an abandoned job.
func (q *querier) JobDeleteAbandoned(ctx context.Context, p *store.JobDeleteAbandonedParams) (bool, error) {
	limit := max(p.Limit, 1)
	gone := false
	step := func(q *querier) error {
		res, err := q.exec(ctx, sqlJobAbandon, p.ID, timeArg(p.Before))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("it is not creating, or its creation went on: %w", store.ErrNotFound)
		}
		if _, err := q.exec(ctx, sqlAbandonedLogsDelete, p.ID, limit); err != nil {
			return err
		}
		res, err = q.exec(ctx, sqlAbandonedTasksDelete, p.ID, limit)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n >= int64(limit) {
			return err
		}
		if _, err := q.exec(ctx, sqlAbandonedJobDelete, p.ID); err != nil {
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
		return false, translate(err, "delete abandoned job %s", p.ID)
	}
	return gone, nil
}
