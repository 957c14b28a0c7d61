package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads and writes that serve the dashboard and the metrics.

var (
	sqlTaskCountFinished = newStatement(`SELECT min(max((finished_at - ?2) / ?3, 0), ?4 - 1) AS b, count(*) FROM tasks
	WHERE job_id = ?1 AND kind = 'chunk' AND state = 'completed' GROUP BY b`)
	sqlTaskCountByState = newStatement(`SELECT kind, state, count(*) FROM tasks GROUP BY kind, state ORDER BY kind, state`)
	sqlTaskListRoots    = newStatement(`SELECT ` + taskColumns + ` FROM tasks
	WHERE kind = 'tree' AND id = job_id AND (?1 = '' OR owner = ?1) ORDER BY created_at DESC, id DESC LIMIT ?2`)
	// ?4 is the workloads a claim named, or NULL for a call that named
	// none; a call recorded late (older than last_seen) keeps those there.
	sqlWorkerUpsert = newStatement(`INSERT INTO workers (id, first_seen, last_seen, last_heartbeat, workloads)
	VALUES (?1, ?2, ?2, ?3, coalesce(?4, ''))
	ON CONFLICT (id) DO UPDATE SET last_seen = max(last_seen, ?2),
	last_heartbeat = CASE WHEN ?3 IS NULL THEN last_heartbeat ELSE max(coalesce(last_heartbeat, ?3), ?3) END,
	workloads = CASE WHEN ?4 IS NULL OR ?2 < last_seen THEN workloads ELSE ?4 END`)
	// ?1 is a JSON array of [id, tasks] rows.
	sqlWorkerAddDone = newStatement(`INSERT INTO workers (id, first_seen, last_seen, tasks_done)
	SELECT value ->> 0, ?2, ?2, value ->> 1 FROM json_each(?1) WHERE true ORDER BY value ->> 0
	ON CONFLICT (id) DO UPDATE SET tasks_done = tasks_done + excluded.tasks_done`)
	sqlWorkerAddDoneOne = newStatement(`INSERT INTO workers (id, first_seen, last_seen, tasks_done) VALUES (?1, ?2, ?2, ?3)
	ON CONFLICT (id) DO UPDATE SET tasks_done = tasks_done + excluded.tasks_done`)
	sqlWorkerDelete = newStatement(`DELETE FROM workers WHERE last_seen < ?`)
	// ?3 and ?4 are the last_seen and id of the worker to continue
	// after, or NULL from the start.
	sqlWorkerPage = newStatement(`SELECT id, first_seen, last_seen, last_heartbeat, workloads, tasks_done FROM workers
	WHERE last_seen >= ?1 AND substr(id, 1, length(?2)) = ?2
	AND (?3 IS NULL OR last_seen < ?3 OR last_seen = ?3 AND id > ?4)
	ORDER BY last_seen DESC, id LIMIT ?5`)
)

// TaskCountFinished counts a job's completed chunks by when they finished.
func (q *querier) TaskCountFinished(ctx context.Context, p *store.TaskCountFinishedParams) ([]int, error) {
	if p.Buckets < 1 || p.Width < time.Microsecond {
		return nil, fmt.Errorf("sqlite: count the finished tasks of job %s: %d buckets of %v; want at least 1 of 1µs", p.JobID, p.Buckets, p.Width)
	}
	out := make([]int, p.Buckets)
	err := q.query(ctx, false, func(r scanner) error {
		var b, n int
		err := r.Scan(&b, &n)
		out[b] = n
		return err
	}, sqlTaskCountFinished, p.JobID, p.Start.UnixMicro(), p.Width.Microseconds(), p.Buckets)
	if err != nil {
		return nil, translate(err, "count the finished tasks of job %s", p.JobID)
	}
	return out, nil
}

// TaskCountByState counts every task by kind and state.
func (q *querier) TaskCountByState(ctx context.Context) ([]store.TaskCount, error) {
	var out []store.TaskCount
	err := q.query(ctx, false, func(r scanner) error {
		var c store.TaskCount
		var kind, state string
		err := r.Scan(&kind, &state, &c.N)
		c.Kind, c.State = domain.TaskKind(kind), domain.TaskState(state)
		out = append(out, c)
		return err
	}, sqlTaskCountByState)
	if err != nil {
		return nil, translate(err, "count tasks by state")
	}
	return out, nil
}

// TaskListRoots returns the newest roots of general trees.
func (q *querier) TaskListRoots(ctx context.Context, owner string, limit int) ([]*domain.Task, error) {
	out, err := q.tasks(ctx, false, sqlTaskListRoots, owner, limitArg(limit))
	if err != nil {
		return nil, translate(err, "list tree roots")
	}
	return out, nil
}

// WorkerUpsert records a worker's call.
func (q *querier) WorkerUpsert(ctx context.Context, p *store.WorkerUpsertParams) error {
	var heartbeat any
	if p.Heartbeat {
		heartbeat = timeArg(p.Now)
	}
	var workloads any
	if p.Announced {
		workloads = store.JoinWorkloads(p.Workloads, p.Versions)
	}
	if _, err := q.exec(ctx, sqlWorkerUpsert, p.ID, timeArg(p.Now), heartbeat, workloads); err != nil {
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
			if _, err := q.exec(ctx, sqlWorkerAddDoneOne, id, timeArg(now), n); err != nil {
				return translate(err, "count the tasks worker %s completed", id)
			}
		}
		return nil
	}
	rows := make([][2]any, 0, len(done))
	for id, n := range done {
		rows = append(rows, [2]any{id, n})
	}
	b, _ := json.Marshal(rows) // strings and integers always encode
	if _, err := q.exec(ctx, sqlWorkerAddDone, string(b), timeArg(now)); err != nil {
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
		afterSeen, afterID = p.After.LastSeen.UnixMicro(), p.After.ID
	}
	var out []*store.Worker
	err := q.query(ctx, false, func(r scanner) error {
		var w store.Worker
		var first, last, beat sql.NullInt64
		var workloads string
		err := r.Scan(&w.ID, &first, &last, &beat, &workloads, &w.TasksDone)
		w.FirstSeen, w.LastSeen, w.LastHeartbeat = timeOf(first), timeOf(last), timeOf(beat)
		w.Workloads, w.Versions = store.SplitWorkloads(workloads)
		out = append(out, &w)
		return err
	}, sqlWorkerPage, p.Since.UnixMicro(), p.Prefix, afterSeen, afterID, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list workers")
	}
	return out, nil
}

// WorkerDelete deletes the workers not seen since before.
func (q *querier) WorkerDelete(ctx context.Context, before time.Time) (int, error) {
	res, err := q.exec(ctx, sqlWorkerDelete, before.UnixMicro())
	if err != nil {
		return 0, translate(err, "delete workers")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "delete workers")
	}
	return int(n), nil
}
