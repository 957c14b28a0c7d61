package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads and writes that serve the dashboard and the metrics.

const (
	sqlTaskCountFinished = `SELECT least(greatest(floor(extract(epoch FROM finished_at - $2) * 1000000 / $3), 0), $4 - 1)::int AS b,
	count(*)::int FROM tasks
WHERE job_id = $1 AND kind = 'chunk' AND state = 'completed' GROUP BY b`
	sqlTaskCountByState = `SELECT kind, state, count(*) FROM tasks GROUP BY kind, state ORDER BY kind, state`
	sqlTaskListRoots    = `SELECT ` + taskColumns + ` FROM tasks
WHERE kind = 'tree' AND id = job_id AND ($2 = '' OR owner = $2) ORDER BY created_at DESC, id DESC LIMIT $1`
	sqlWorkerUpsert = `INSERT INTO workers AS w (id, first_seen, last_seen, last_heartbeat) VALUES ($1, $2, $2, $3)
ON CONFLICT (id) DO UPDATE SET last_seen = greatest(w.last_seen, $2),
	last_heartbeat = CASE WHEN $3::timestamptz IS NULL THEN w.last_heartbeat ELSE greatest(w.last_heartbeat, $3) END`
	sqlWorkerDelete = `DELETE FROM workers WHERE last_seen < $1`
	sqlWorkerList   = `SELECT id, first_seen, last_seen, last_heartbeat FROM workers
WHERE last_seen >= $1 ORDER BY last_seen DESC, id LIMIT $2`
)

// TaskCountFinished counts a job's completed chunks by when they finished.
func (q *querier) TaskCountFinished(ctx context.Context, p *store.TaskCountFinishedParams) ([]int, error) {
	if p.Buckets < 1 || p.Width < time.Microsecond {
		return nil, fmt.Errorf("postgres: count the finished tasks of job %s: %d buckets of %v; want at least 1 of 1µs", p.JobID, p.Buckets, p.Width)
	}
	rows, err := q.db.Query(ctx, sqlTaskCountFinished, p.JobID, p.Start, p.Width.Microseconds(), p.Buckets)
	if err != nil {
		return nil, translate(err, "count the finished tasks of job %s", p.JobID)
	}
	out := make([]int, p.Buckets)
	var b, n int
	_, err = pgx.ForEachRow(rows, []any{&b, &n}, func() error {
		out[b] = n
		return nil
	})
	if err != nil {
		return nil, translate(err, "count the finished tasks of job %s", p.JobID)
	}
	return out, nil
}

// TaskCountByState counts every task by kind and state.
func (q *querier) TaskCountByState(ctx context.Context) ([]store.TaskCount, error) {
	rows, err := q.db.Query(ctx, sqlTaskCountByState)
	if err != nil {
		return nil, translate(err, "count tasks by state")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.TaskCount, error) {
		var c store.TaskCount
		var kind, state string
		err := r.Scan(&kind, &state, &c.N)
		c.Kind, c.State = domain.TaskKind(kind), domain.TaskState(state)
		return c, err
	})
	if err != nil {
		return nil, translate(err, "count tasks by state")
	}
	return out, nil
}

// TaskListRoots returns the newest roots of general trees.
func (q *querier) TaskListRoots(ctx context.Context, owner string, limit int) ([]*domain.Task, error) {
	rows, err := q.db.Query(ctx, sqlTaskListRoots, limitArg(limit), owner)
	if err != nil {
		return nil, translate(err, "list tree roots")
	}
	return collectTasks(rows, "list tree roots")
}

// WorkerUpsert records a worker's call.
func (q *querier) WorkerUpsert(ctx context.Context, p *store.WorkerUpsertParams) error {
	var heartbeat any
	if p.Heartbeat {
		heartbeat = p.Now
	}
	if _, err := q.db.Exec(ctx, sqlWorkerUpsert, p.ID, p.Now, heartbeat); err != nil {
		return translate(err, "record worker %s", p.ID)
	}
	return nil
}

// WorkerList returns the workers seen since a time.
func (q *querier) WorkerList(ctx context.Context, p *store.WorkerListParams) ([]*store.Worker, error) {
	rows, err := q.db.Query(ctx, sqlWorkerList, p.Since, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list workers")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Worker, error) {
		var w store.Worker
		var first, last, beat pgtype.Timestamptz
		err := r.Scan(&w.ID, &first, &last, &beat)
		w.FirstSeen, w.LastSeen, w.LastHeartbeat = timeOf(first), timeOf(last), timeOf(beat)
		return &w, err
	})
	if err != nil {
		return nil, translate(err, "list workers")
	}
	return out, nil
}

// WorkerDelete deletes the workers not seen since before.
func (q *querier) WorkerDelete(ctx context.Context, before time.Time) (int, error) {
	tag, err := q.db.Exec(ctx, sqlWorkerDelete, before)
	if err != nil {
		return 0, translate(err, "delete workers")
	}
	return int(tag.RowsAffected()), nil
}
