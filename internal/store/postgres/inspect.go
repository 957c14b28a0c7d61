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
	// $4 is the workloads a claim named, or NULL for a call that named
	// none; a call recorded late (older than last_seen) keeps those there.
	sqlWorkerUpsert = `INSERT INTO workers AS w (id, first_seen, last_seen, last_heartbeat, workloads)
VALUES ($1, $2, $2, $3, coalesce($4, ''))
ON CONFLICT (id) DO UPDATE SET last_seen = greatest(w.last_seen, $2),
	last_heartbeat = CASE WHEN $3::timestamptz IS NULL THEN w.last_heartbeat ELSE greatest(w.last_heartbeat, $3) END,
	workloads = CASE WHEN $4::text IS NULL OR $2 < w.last_seen THEN w.workloads ELSE $4 END`
	// The ORDER BY takes the rows' locks in one order, so that concurrent
	// additions queue rather than deadlock.
	sqlWorkerAddDone = `INSERT INTO workers AS w (id, first_seen, last_seen, tasks_done)
SELECT id, $3, $3, n FROM unnest($1::text[], $2::bigint[]) AS d(id, n) ORDER BY id
ON CONFLICT (id) DO UPDATE SET tasks_done = w.tasks_done + excluded.tasks_done`
	sqlWorkerAddDoneOne = `INSERT INTO workers AS w (id, first_seen, last_seen, tasks_done) VALUES ($1, $2, $2, $3)
ON CONFLICT (id) DO UPDATE SET tasks_done = w.tasks_done + excluded.tasks_done`
	sqlWorkerDelete = `DELETE FROM workers WHERE last_seen < $1`
	// $3 and $4 are the last_seen and id of the worker to continue
	// after, or NULL from the start.
	sqlWorkerPage = `SELECT id, first_seen, last_seen, last_heartbeat, workloads, tasks_done FROM workers
WHERE last_seen >= $1 AND starts_with(id, $2)
AND ($3::timestamptz IS NULL OR last_seen < $3 OR last_seen = $3 AND id > $4::text)
ORDER BY last_seen DESC, id LIMIT $5`
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
	var workloads any
	if p.Announced {
		workloads = store.JoinWorkloads(p.Workloads, p.Versions)
	}
	if _, err := q.db.Exec(ctx, sqlWorkerUpsert, p.ID, p.Now, heartbeat, workloads); err != nil {
		return translate(err, "record worker %s", p.ID)
	}
	return nil
}

// WorkerAddDone adds to the tasks workers completed, in one statement.
func (q *querier) WorkerAddDone(ctx context.Context, done map[string]int64, now time.Time) error {
	if len(done) == 0 {
		return nil
	}
	if len(done) == 1 {
		for id, n := range done {
			if _, err := q.db.Exec(ctx, sqlWorkerAddDoneOne, id, now, n); err != nil {
				return translate(err, "count the tasks worker %s completed", id)
			}
		}
		return nil
	}
	ids, ns := make([]string, 0, len(done)), make([]int64, 0, len(done))
	for id, n := range done {
		ids, ns = append(ids, id), append(ns, n)
	}
	if _, err := q.db.Exec(ctx, sqlWorkerAddDone, ids, ns, now); err != nil {
		return translate(err, "count the tasks %d workers completed", len(done))
	}
	return nil
}

// WorkerList returns the workers seen since a time.
func (q *querier) WorkerList(ctx context.Context, p *store.WorkerListParams) ([]*store.Worker, error) {
	return q.WorkerPage(ctx, &store.WorkerPageParams{Since: p.Since, Limit: p.Limit})
}

// WorkerPage returns a page of the workers seen since a time.
func (q *querier) WorkerPage(ctx context.Context, p *store.WorkerPageParams) ([]*store.Worker, error) {
	var afterSeen, afterID any
	if p.After != nil {
		afterSeen, afterID = p.After.LastSeen, p.After.ID
	}
	rows, err := q.db.Query(ctx, sqlWorkerPage, p.Since, p.Prefix, afterSeen, afterID, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list workers")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Worker, error) {
		var w store.Worker
		var first, last, beat pgtype.Timestamptz
		var workloads string
		err := r.Scan(&w.ID, &first, &last, &beat, &workloads, &w.TasksDone)
		w.FirstSeen, w.LastSeen, w.LastHeartbeat = timeOf(first), timeOf(last), timeOf(beat)
		w.Workloads, w.Versions = store.SplitWorkloads(workloads)
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
