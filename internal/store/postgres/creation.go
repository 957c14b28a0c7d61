package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// A job created in batches: hidden (creating) until done, renewed by each
// batch, and deleted in steps when its creation died.
var (
	sqlJobUpdateCreation = `UPDATE jobs SET updated_at = $2, creating = NOT $3, version = version + 1
WHERE id = $1 AND creating AND status <> 'cancelled'`

	sqlJobListAbandoned = `SELECT ` + jobSelectColumns + ` FROM jobs
WHERE creating AND (updated_at < $1 OR status = 'cancelled')
ORDER BY updated_at LIMIT $2`

	sqlJobAbandon = `UPDATE jobs SET status = 'cancelled', error = 'its creation stopped before it was whole',
	version = version + 1
WHERE id = $1 AND creating AND (updated_at < $2 OR status = 'cancelled')`

	// One statement deletes a step of the job's tasks and their logs, so
	// that both name the same tasks whatever moves meanwhile.
	sqlAbandonedTasksDelete = `WITH gone AS (
	DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE job_id = $1 ORDER BY job_id, kind, state, chunk_index LIMIT $2) RETURNING id
), logs AS (
	DELETE FROM task_logs WHERE task_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone`

	sqlAbandonedJobDelete = `DELETE FROM jobs WHERE id = $1 AND creating`
)

// JobUpdateCreation renews or ends the creation of job p.ID.
func (q *querier) JobUpdateCreation(ctx context.Context, p *store.JobUpdateCreationParams) error {
	tag, err := q.db.Exec(ctx, sqlJobUpdateCreation, p.ID, p.Now, p.Done)
	if err != nil {
		return translate(err, "record the creation of job %s", p.ID)
	}
	if tag.RowsAffected() == 0 {
		return translate(store.ErrNotFound, "record the creation of job %s: it is gone, whole or abandoned", p.ID)
	}
	return nil
}

// JobListAbandoned returns jobs whose creation died.
func (q *querier) JobListAbandoned(ctx context.Context, p *store.JobListAbandonedParams) ([]*domain.Job, error) {
	rows, err := q.db.Query(ctx, sqlJobListAbandoned, p.Before, max(p.Limit, 1))
	if err != nil {
		return nil, translate(err, "list abandoned jobs")
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*domain.Job, error) { return scanJob(row) })
	if err != nil {
		return nil, translate(err, "list abandoned jobs")
	}
	return jobs, nil
}

// JobDeleteAbandoned deletes one step of an abandoned job.
func (q *querier) JobDeleteAbandoned(ctx context.Context, p *store.JobDeleteAbandonedParams) (bool, error) {
	limit := max(p.Limit, 1)
	gone := false
	err := q.atomically(ctx, func(db dbtx) error {
		tag, err := db.Exec(ctx, sqlJobAbandon, p.ID, p.Before)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("it is not creating, or its creation went on: %w", store.ErrNotFound)
		}
		var deleted int
		if err := db.QueryRow(ctx, sqlAbandonedTasksDelete, p.ID, limit).Scan(&deleted); err != nil {
			return err
		}
		if deleted >= limit {
			return nil
		}
		if _, err := db.Exec(ctx, sqlAbandonedJobDelete, p.ID); err != nil {
			return err
		}
		gone = true
		return nil
	})
	if err != nil {
		return false, translate(err, "delete abandoned job %s", p.ID)
	}
	return gone, nil
}
