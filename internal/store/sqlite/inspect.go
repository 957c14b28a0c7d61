package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads and writes that serve the dashboard and the metrics.

const (
	taskCountFinishedSQL = `SELECT min(max((finished_at - ?2) / ?3, 0), ?4 - 1) AS b, count(*) FROM tasks
	WHERE job_id = ?1 AND kind = 'chunk' AND state = 'completed' GROUP BY b`
	taskCountByStateSQL = `SELECT kind, state, count(*) FROM tasks GROUP BY kind, state ORDER BY kind, state`
	taskListRootsSQL    = `SELECT ` + taskCols + ` FROM tasks
	WHERE kind = 'tree' AND id = job_id ORDER BY created_at DESC, id DESC LIMIT ?`
	workerUpsertSQL = `INSERT INTO workers (id, first_seen, last_seen, last_heartbeat) VALUES (?1, ?2, ?2, ?3)
	ON CONFLICT (id) DO UPDATE SET last_seen = max(last_seen, ?2),
	last_heartbeat = CASE WHEN ?3 IS NULL THEN last_heartbeat ELSE max(coalesce(last_heartbeat, ?3), ?3) END`
	workerDeleteSQL = `DELETE FROM workers WHERE last_seen < ?`
	workerListSQL   = `SELECT id, first_seen, last_seen, last_heartbeat FROM workers
	WHERE last_seen >= ? ORDER BY last_seen DESC, id LIMIT ?`
)

// TaskCountFinished counts a job's completed chunks by when they finished.
func (q *querier) TaskCountFinished(ctx context.Context, p *store.TaskCountFinishedParams) ([]int, error) {
	if err := checkBuckets(p); err != nil {
		return nil, err
	}
	out := make([]int, p.Buckets)
	err := q.query(ctx, false, func(r scanner) error {
		var b, n int
		err := r.Scan(&b, &n)
		out[b] = n
		return err
	}, taskCountFinishedSQL, p.JobID, p.Start.UnixMicro(), p.Width.Microseconds(), p.Buckets)
	if err != nil {
		return nil, fmt.Errorf("sqlite: finish counts of job %s: %w", p.JobID, err)
	}
	return out, nil
}

func checkBuckets(p *store.TaskCountFinishedParams) error {
	if p.Buckets < 1 || p.Width < time.Microsecond {
		return fmt.Errorf("sqlite: finish counts of job %s: %d buckets of %v; want at least 1 of 1µs", p.JobID, p.Buckets, p.Width)
	}
	return nil
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
	}, taskCountByStateSQL)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count tasks by state: %w", err)
	}
	return out, nil
}

// TaskListRoots returns the newest roots of general trees.
func (q *querier) TaskListRoots(ctx context.Context, limit int) ([]*domain.Task, error) {
	out, err := q.tasks(ctx, false, taskListRootsSQL, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tree roots: %w", err)
	}
	return out, nil
}

// WorkerUpsert records a worker's call.
func (q *querier) WorkerUpsert(ctx context.Context, p *store.WorkerUpsertParams) error {
	var heartbeat any
	if p.Heartbeat {
		heartbeat = timeArg(p.Now)
	}
	if _, err := q.exec(ctx, workerUpsertSQL, p.ID, timeArg(p.Now), heartbeat); err != nil {
		return fmt.Errorf("sqlite: record worker %s: %w", p.ID, err)
	}
	return nil
}

// WorkerList returns the workers seen since a time.
func (q *querier) WorkerList(ctx context.Context, p *store.WorkerListParams) ([]*store.Worker, error) {
	var out []*store.Worker
	err := q.query(ctx, false, func(r scanner) error {
		var w store.Worker
		var first, last, beat sql.NullInt64
		err := r.Scan(&w.ID, &first, &last, &beat)
		w.FirstSeen, w.LastSeen, w.LastHeartbeat = timeCol(first), timeCol(last), timeCol(beat)
		out = append(out, &w)
		return err
	}, workerListSQL, p.Since.UnixMicro(), limitArg(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list workers: %w", err)
	}
	return out, nil
}

// WorkerDelete deletes the workers not seen since before.
func (q *querier) WorkerDelete(ctx context.Context, before time.Time) (int, error) {
	res, err := q.exec(ctx, workerDeleteSQL, before.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete workers: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
