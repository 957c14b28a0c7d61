package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

const (
	sqlTaskArgInsert   = `INSERT INTO task_args (task_id, position, value, upstream_id) VALUES ($1, $2, $3, $4)`
	sqlTaskArgList     = `SELECT task_id, position, value, upstream_id FROM task_args WHERE task_id = $1 ORDER BY position`
	sqlTaskArgResolve  = `UPDATE task_args SET value = $1 WHERE task_id = $2 AND upstream_id = $3 AND value IS NULL`
	sqlTaskArgListRefs = `SELECT a.task_id, a.position, a.upstream_id FROM task_args a JOIN tasks t ON t.id = a.task_id
WHERE t.job_id = $1 AND a.upstream_id <> '' AND (NOT $2 OR a.value IS NULL) ORDER BY a.task_id, a.position`
)

// TaskArgInsert inserts args, all or none.
func (q *querier) TaskArgInsert(ctx context.Context, args []domain.TaskArg) error {
	if len(args) == 0 {
		return nil
	}
	err := q.atomically(ctx, func(db dbtx) error {
		for _, a := range args {
			if _, err := db.Exec(ctx, sqlTaskArgInsert, a.TaskID, a.Position, bytesArg(a.Value), a.UpstreamID); err != nil {
				return fmt.Errorf("argument %d of task %s: %w", a.Position, a.TaskID, err)
			}
		}
		return nil
	})
	if err != nil {
		return translate(err, "insert %d task arguments", len(args))
	}
	return nil
}

// TaskArgList returns a task's arguments by position.
func (q *querier) TaskArgList(ctx context.Context, taskID string) ([]domain.TaskArg, error) {
	rows, err := q.db.Query(ctx, sqlTaskArgList, taskID)
	if err != nil {
		return nil, translate(err, "list arguments of task %s", taskID)
	}
	var out []domain.TaskArg
	var a domain.TaskArg
	_, err = pgx.ForEachRow(rows, []any{&a.TaskID, &a.Position, &a.Value, &a.UpstreamID}, func() error {
		out = append(out, a)
		a.Value = nil
		return nil
	})
	if err != nil {
		return nil, translate(err, "list arguments of task %s", taskID)
	}
	return out, nil
}

// TaskArgResolve sets the argument of p.TaskID that is p.UpstreamID's result.
func (q *querier) TaskArgResolve(ctx context.Context, p *store.TaskArgResolveParams) (bool, error) {
	tag, err := q.db.Exec(ctx, sqlTaskArgResolve, p.Value, p.TaskID, p.UpstreamID)
	if err != nil {
		return false, translate(err, "resolve argument of task %s from %s", p.TaskID, p.UpstreamID)
	}
	return tag.RowsAffected() > 0, nil
}

// TaskArgListRefs returns the arguments of a job's tasks that are results
// of upstream tasks; with p.Open, those still waiting for them.
func (q *querier) TaskArgListRefs(ctx context.Context, p *store.TaskArgListRefsParams) ([]domain.TaskArg, error) {
	rows, err := q.db.Query(ctx, sqlTaskArgListRefs, p.JobID, p.Open)
	if err != nil {
		return nil, translate(err, "list the upstream arguments of job %s", p.JobID)
	}
	var out []domain.TaskArg
	var a domain.TaskArg
	_, err = pgx.ForEachRow(rows, []any{&a.TaskID, &a.Position, &a.UpstreamID}, func() error {
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, translate(err, "list the upstream arguments of job %s", p.JobID)
	}
	return out, nil
}
