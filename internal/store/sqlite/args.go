package sqlite

import (
	"context"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

var (
	sqlTaskArgInsert   = newStatement(`INSERT INTO task_args (task_id, position, value, upstream_id) VALUES (?, ?, ?, ?)`)
	sqlTaskArgList     = newStatement(`SELECT task_id, position, value, upstream_id FROM task_args WHERE task_id = ? ORDER BY position`)
	sqlTaskArgResolve  = newStatement(`UPDATE task_args SET value = ? WHERE task_id = ? AND upstream_id = ? AND value IS NULL`)
	sqlTaskArgListRefs = newStatement(`SELECT a.task_id, a.position, a.upstream_id FROM task_args a JOIN tasks t ON t.id = a.task_id
	WHERE t.job_id = ? AND a.upstream_id <> '' AND (NOT ? OR a.value IS NULL) ORDER BY a.task_id, a.position`)
)

// TaskArgInsert inserts args, all or none.
func (q *querier) TaskArgInsert(ctx context.Context, args []domain.TaskArg) error {
	if len(args) == 0 {
		return nil
	}
	err := q.atomically(ctx, "task_arg_insert", func(q *querier) error {
		for _, a := range args {
			if _, err := q.exec(ctx, sqlTaskArgInsert, a.TaskID, a.Position, jsonArg(a.Value), a.UpstreamID); err != nil {
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
	var out []domain.TaskArg
	err := q.query(ctx, false, func(r scanner) error {
		var a domain.TaskArg
		var value *string
		if err := r.Scan(&a.TaskID, &a.Position, &value, &a.UpstreamID); err != nil {
			return err
		}
		if value != nil {
			a.Value = []byte(*value)
		}
		out = append(out, a)
		return nil
	}, sqlTaskArgList, taskID)
	if err != nil {
		return nil, translate(err, "list arguments of task %s", taskID)
	}
	return out, nil
}

// TaskArgResolve sets the argument of p.TaskID that is p.UpstreamID's result.
func (q *querier) TaskArgResolve(ctx context.Context, p *store.TaskArgResolveParams) (bool, error) {
	res, err := q.exec(ctx, sqlTaskArgResolve, string(p.Value), p.TaskID, p.UpstreamID)
	if err != nil {
		return false, translate(err, "resolve argument of task %s from %s", p.TaskID, p.UpstreamID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, translate(err, "resolve argument of task %s from %s", p.TaskID, p.UpstreamID)
	}
	return n > 0, nil
}

// TaskArgListRefs returns the arguments of a job's tasks that are results
// of upstream tasks; with p.Open, those still waiting for them.
func (q *querier) TaskArgListRefs(ctx context.Context, p *store.TaskArgListRefsParams) ([]domain.TaskArg, error) {
	var out []domain.TaskArg
	err := q.query(ctx, false, func(r scanner) error {
		var a domain.TaskArg
		err := r.Scan(&a.TaskID, &a.Position, &a.UpstreamID)
		out = append(out, a)
		return err
	}, sqlTaskArgListRefs, p.JobID, p.Open)
	if err != nil {
		return nil, translate(err, "list the upstream arguments of job %s", p.JobID)
	}
	return out, nil
}
