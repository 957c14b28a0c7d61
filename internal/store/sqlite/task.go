package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

const (
	taskColumns = `id, job_id, kind, workload, chunk_index, state, attempt, max_attempts, lease_seconds, lease_owner,
	lease_expires_at, run_after, priority, job_created_at, input_uri, input_sha256, input_bytes, result, metrics,
	error, downstream_id, pending_upstreams, created_at, updated_at, finished_at, version, input_offset, input_length,
	timeout_seconds, attempt_deadline, owner, leased_at, workers, voters, ballots, second_lease`
	taskNumColumns = 36

	// taskBatch is the rows of one multi-row INSERT; a batch of n tasks runs
	// as full batches, then batches of taskSmallBatch, then the rest in one
	// statement, so a prepared statement for each n up to taskSmallBatch,
	// and one for taskBatch, serve any n.
	taskBatch      = 128
	taskSmallBatch = 16
)

// taskListColumns are taskColumns as lists select them: without the chunk
// output, which only TaskGet (and the stitcher's TaskResultList) reads.
var taskListColumns = strings.Replace(taskColumns, "input_bytes, result,", "input_bytes, NULL,", 1)

var (
	sqlTaskGet = newStatement(`SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`)

	// TaskList with and without a state. LIMIT -1 is no limit.
	sqlTaskList      = newStatement(taskListSQL(false))
	sqlTaskListState = newStatement(taskListSQL(true))

	sqlTaskUpdate = newStatement(`UPDATE tasks SET state = ?, attempt = ?, lease_owner = ?, lease_expires_at = ?, run_after = ?,
	result = coalesce(?, result), metrics = ?, error = ?, pending_upstreams = ?, updated_at = ?, finished_at = ?, max_attempts = ?,
	attempt_deadline = ?, leased_at = ?, ballots = ?, voters = ?, second_lease = ?, version = version + 1
	WHERE id = ? AND version = ?`)

	sqlTaskGetMany  = newStatement(`SELECT ` + taskColumns + ` FROM tasks WHERE id IN (SELECT value FROM json_each(?))`)
	sqlTaskVersions = newStatement(`SELECT id, version FROM tasks WHERE id IN (SELECT value FROM json_each(?))`)

	sqlTaskExists = newStatement(`SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?)`)

	sqlTaskListExpired = newStatement(`SELECT ` + taskListColumns + ` FROM tasks
	WHERE state = 'leased' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?`)
	// A second lease's attempt counts among those handed out (see
	// domain.SecondLease): the next attempt is numbered after it.
	sqlTaskRetryJob = newStatement(`UPDATE tasks SET state = 'pending',
	attempt = max(attempt, coalesce(second_lease ->> '$.a', 0)),
	max_attempts = max(attempt, coalesce(second_lease ->> '$.a', 0)) + ?1, run_after = NULL,
	lease_expires_at = NULL, second_lease = NULL, finished_at = NULL, updated_at = ?2, version = version + 1
	WHERE job_id = ?3 AND kind = 'chunk' AND state IN ('failed', 'cancelled')`)
	sqlTaskCancelJob = newStatement(`UPDATE tasks SET state = 'cancelled', lease_expires_at = NULL, finished_at = ?1, updated_at = ?1, version = version + 1
	WHERE job_id = ?2 AND state IN ('waiting', 'pending', 'leased') AND id <> ?3`)
	// In SET, every column reference is to the row before the update.
	sqlTaskDecrementUpstreams = newStatement(`UPDATE tasks SET pending_upstreams = pending_upstreams - ?1,
	state = CASE WHEN state = 'waiting' AND pending_upstreams - ?1 <= 0 THEN 'pending' ELSE state END,
	updated_at = ?2, version = version + 1 WHERE id = ?3 RETURNING ` + taskColumns)
	sqlTaskResultList = newStatement(`SELECT chunk_index, result FROM tasks
	WHERE job_id = ? AND kind = 'chunk' AND state = 'completed' AND chunk_index > ?
	ORDER BY chunk_index LIMIT ?`)
	sqlTaskCountByJob = newStatement(`SELECT state, count(*) FROM tasks WHERE job_id = ? AND kind = 'chunk' GROUP BY state`)
)

// sqlTaskInsert are the INSERTs of 1 to taskSmallBatch rows, and of
// taskBatch rows.
var sqlTaskInsert = func() map[int]*statement {
	m := map[int]*statement{taskBatch: newStatement(taskInsertSQL(taskBatch))}
	for n := 1; n <= taskSmallBatch; n++ {
		m[n] = newStatement(taskInsertSQL(n))
	}
	return m
}()

// taskInsertSQL is the INSERT of n rows.
func taskInsertSQL(n int) string {
	row := "(" + placeholders(taskNumColumns) + ")"
	return `INSERT INTO tasks (` + taskColumns + `) VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// taskListSQL is TaskList's query, with or without a state.
func taskListSQL(state bool) string {
	q := `SELECT ` + taskListColumns + ` FROM tasks WHERE job_id = ? AND kind = ? AND chunk_index > ?`
	if state {
		q += ` AND state = ?`
	}
	return q + ` ORDER BY chunk_index LIMIT ?`
}

// TaskInsert inserts tasks, all or none, each with version Version+1, and
// sets their Version to it. A taken ID is store.ErrDuplicate.
func (q *querier) TaskInsert(ctx context.Context, tasks []*domain.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	for _, t := range tasks {
		domain.NormRunAfter(t)
	}
	if _, ok := sqlTaskInsert[len(tasks)]; ok {
		// One statement: all or none by itself.
		if err := q.insertTaskRows(ctx, tasks, make([]any, 0, len(tasks)*taskNumColumns)); err != nil {
			return translate(err, "insert %d tasks (first %s)", len(tasks), tasks[0].ID)
		}
	} else if err := q.atomically(ctx, "task_insert", func(q *querier) error {
		// q is the transaction's querier, whichever ran it: the
		// committer checkpoints once it commits.
		q.bigWrite = q.bigWrite || len(tasks) >= bigInsert
		return q.insertTasks(ctx, tasks)
	}); err != nil {
		return translate(err, "insert %d tasks (first %s)", len(tasks), tasks[0].ID)
	}
	for _, t := range tasks {
		t.Version++
	}
	return nil
}

// insertTasks inserts tasks in batches.
func (q *querier) insertTasks(ctx context.Context, tasks []*domain.Task) error {
	args := make([]any, 0, min(len(tasks), taskBatch)*taskNumColumns)
	for len(tasks) > 0 {
		n := len(tasks)
		switch {
		case n >= taskBatch:
			n = taskBatch
		case n >= taskSmallBatch:
			n = taskSmallBatch
		}
		if err := q.insertTaskRows(ctx, tasks[:n], args[:0]); err != nil {
			return err
		}
		tasks = tasks[n:]
	}
	return nil
}

// insertTaskRows inserts tasks in one statement, building its arguments in args.
func (q *querier) insertTaskRows(ctx context.Context, tasks []*domain.Task, args []any) error {
	for _, t := range tasks {
		args = append(args, t.ID, t.JobID, string(t.Kind), t.Workload, t.ChunkIndex, string(t.State), t.Attempt,
			t.MaxAttempts, t.LeaseSeconds, t.LeaseOwner, timeArg(t.LeaseExpiresAt), timeArg(t.RunAfter), t.Priority,
			timeArg(t.JobCreatedAt), t.InputURI, t.InputSHA256, t.InputBytes, bytesArg(t.Result), jsonArg(t.Metrics),
			t.Error, t.DownstreamID, t.PendingUpstreams, timeArg(t.CreatedAt), timeArg(t.UpdatedAt),
			timeArg(t.FinishedAt), t.Version+1, t.InputOffset, t.InputLength, t.TimeoutSeconds, timeArg(t.AttemptDeadline), t.Owner,
			timeArg(t.LeasedAt), string(t.Workers), t.Voters, jsonArg(store.EncodeBallots(t.Ballots)), jsonArg(store.EncodeSecondLease(t.Second)))
	}
	_, err := q.exec(ctx, sqlTaskInsert[len(tasks)], args...)
	return err
}

// TaskGet returns the task with id, or store.ErrNotFound.
func (q *querier) TaskGet(ctx context.Context, id string) (*domain.Task, error) {
	var t *domain.Task
	err := q.queryRow(ctx, false, func(r scanner) (err error) { t, err = scanTask(r); return err }, sqlTaskGet, id)
	if err != nil {
		return nil, translate(err, "get task %s", id)
	}
	return t, nil
}

// TaskLockMany returns tasks: a transaction on SQLite holds the one
// writer, so no other writes them before it ends.
func (q *querier) TaskLockMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	return q.TaskGetMany(ctx, ids)
}

// TaskLockVersions returns the versions of the tasks of ids that exist;
// the transaction holds the one writer, as for TaskLockMany.
func (q *querier) TaskLockVersions(ctx context.Context, ids []string) (map[string]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := queryByKey[int64](ctx, q, sqlTaskVersions, jsonArray(ids))
	if err != nil {
		return nil, translate(err, "lock %d tasks", len(ids))
	}
	return out, nil
}

// queryByKey reads the rows of (key, number) that query gives for args:
// a task's ID and version, an account and a count.
func queryByKey[V int | int64](ctx context.Context, q *querier, query *statement, args ...any) (map[string]V, error) {
	out := map[string]V{}
	err := q.query(ctx, false, func(r scanner) error {
		var (
			k string
			v V
		)
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		out[k] = v
		return nil
	}, query, args...)
	return out, err
}

// TaskList returns a job's tasks of one kind by ChunkIndex ascending. An
// AfterIndex below 0 lists from the start; a Limit of 0 or less means no limit.
func (q *querier) TaskList(ctx context.Context, p *store.TaskListParams) ([]*domain.Task, error) {
	after := int64(p.AfterIndex)
	if after < 0 {
		after = math.MinInt64
	}
	args := []any{p.JobID, string(p.Kind), after}
	if p.State != "" {
		args = append(args, string(p.State))
	}
	args = append(args, limitArg(p.Limit))
	query := sqlTaskList
	if p.State != "" {
		query = sqlTaskListState
	}
	out, err := q.tasks(ctx, false, query, args...)
	if err != nil {
		return nil, translate(err, "list %s tasks of job %s", p.Kind, p.JobID)
	}
	return out, nil
}

// TaskUpdate writes t's mutable fields where the stored version equals
// t.Version, and bumps t.Version; otherwise store.ErrStale, or
// store.ErrNotFound when the task is gone.
func (q *querier) TaskUpdate(ctx context.Context, t *domain.Task) error {
	domain.NormRunAfter(t)
	res, err := q.exec(ctx, sqlTaskUpdate, string(t.State), t.Attempt, t.LeaseOwner, timeArg(t.LeaseExpiresAt),
		timeArg(t.RunAfter), bytesArg(t.Result), jsonArg(t.Metrics), t.Error, t.PendingUpstreams,
		timeArg(t.UpdatedAt), timeArg(t.FinishedAt), t.MaxAttempts, timeArg(t.AttemptDeadline), timeArg(t.LeasedAt),
		jsonArg(store.EncodeBallots(t.Ballots)), t.Voters, jsonArg(store.EncodeSecondLease(t.Second)), t.ID, t.Version)
	if err != nil {
		return translate(err, "update task %s", t.ID)
	}
	if n, err := res.RowsAffected(); err != nil {
		return translate(err, "update task %s", t.ID)
	} else if n == 0 {
		return q.missing(ctx, sqlTaskExists, "task", t.ID, t.Version)
	}
	t.Version++
	return nil
}

// TaskGetMany returns the tasks of ids that exist, in one statement.
func (q *querier) TaskGetMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := q.tasks(ctx, false, sqlTaskGetMany, jsonArray(ids))
	if err != nil {
		return nil, translate(err, "get %d tasks", len(ids))
	}
	return out, nil
}

// TaskUpdateMany is TaskUpdate of each task: statements on SQLite cost no
// round trip.
func (q *querier) TaskUpdateMany(ctx context.Context, tasks []*domain.Task) error {
	for _, t := range tasks {
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// TaskListExpired returns the leased tasks whose lease expired at or before
// p.Now, oldest expiry first, at most p.Limit of them (all when 0 or less).
func (q *querier) TaskListExpired(ctx context.Context, p *store.TaskListExpiredParams) ([]*domain.Task, error) {
	out, err := q.tasks(ctx, false, sqlTaskListExpired, p.Now.UnixMicro(), limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired leases")
	}
	return out, nil
}

// TaskCancelJob moves every task of job p.JobID that is waiting, pending or
// leased, except the one with ID p.Except, to cancelled at p.Now with no
// lease expiry, and returns how many it moved.
func (q *querier) TaskCancelJob(ctx context.Context, p *store.TaskCancelJobParams) (int, error) {
	res, err := q.exec(ctx, sqlTaskCancelJob, timeArg(p.Now), p.JobID, p.Except)
	if err != nil {
		return 0, translate(err, "cancel tasks of job %s", p.JobID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "cancel tasks of job %s", p.JobID)
	}
	return int(n), nil
}

// TaskRetryJob puts the job's failed and cancelled chunk tasks back to
// pending with p.MaxAttempts more attempts, and returns how many it moved.
func (q *querier) TaskRetryJob(ctx context.Context, p *store.TaskRetryJobParams) (int, error) {
	res, err := q.exec(ctx, sqlTaskRetryJob, p.MaxAttempts, timeArg(p.Now), p.JobID)
	if err != nil {
		return 0, translate(err, "retry tasks of job %s", p.JobID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "retry tasks of job %s", p.JobID)
	}
	return int(n), nil
}

// TaskDecrementUpstreams records that p.N upstreams of task p.ID completed,
// in one statement, and returns the task as written (store.ErrNotFound
// when there is none); a waiting task left with no pending upstreams
// becomes pending.
func (q *querier) TaskDecrementUpstreams(ctx context.Context, p *store.TaskDecrementUpstreamsParams) (*domain.Task, error) {
	var t *domain.Task
	err := q.queryRow(ctx, true, func(r scanner) (err error) { t, err = scanTask(r); return err },
		sqlTaskDecrementUpstreams, p.N, timeArg(p.Now), p.ID)
	if err != nil {
		return nil, translate(err, "record %d upstreams of task %s done", p.N, p.ID)
	}
	return t, nil
}

// TaskResultList returns a page of the outputs of a job's completed chunk
// tasks by ChunkIndex ascending.
func (q *querier) TaskResultList(ctx context.Context, p *store.TaskResultListParams) ([]store.ChunkResult, error) {
	var out []store.ChunkResult
	err := q.query(ctx, false, func(r scanner) error {
		var c store.ChunkResult
		err := r.Scan(&c.ChunkIndex, &c.Result)
		out = append(out, c)
		return err
	}, sqlTaskResultList, p.JobID, p.AfterIndex, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "read results of job %s after chunk %d", p.JobID, p.AfterIndex)
	}
	return out, nil
}

// TaskCountByJob counts each listed job's chunk tasks by state. SQLite
// answers in process, so one prepared statement per job costs what one
// statement for all would.
func (q *querier) TaskCountByJob(ctx context.Context, jobIDs []string) (map[string]domain.TaskCounts, error) {
	out := make(map[string]domain.TaskCounts, len(jobIDs))
	for _, id := range jobIDs {
		var c domain.TaskCounts
		err := q.query(ctx, false, func(r scanner) error {
			var (
				state string
				n     int
			)
			if err := r.Scan(&state, &n); err != nil {
				return err
			}
			c.Add(domain.TaskState(state), n)
			return nil
		}, sqlTaskCountByJob, id)
		if err != nil {
			return nil, translate(err, "count tasks of %d jobs", len(jobIDs))
		}
		if c.Total > 0 {
			out[id] = c
		}
	}
	return out, nil
}

// tasks runs a query returning task rows.
func (q *querier) tasks(ctx context.Context, write bool, query *statement, args ...any) ([]*domain.Task, error) {
	var out []*domain.Task
	err := q.query(ctx, write, func(r scanner) error {
		t, err := scanTask(r)
		out = append(out, t)
		return err
	}, query, args...)
	return out, err
}

func scanTask(r scanner) (*domain.Task, error) {
	var (
		t                             domain.Task
		kind, state                   string
		metrics, ballots, second      []byte
		expires, runAfter, jobCreated sql.NullInt64
		created, updated, finished    sql.NullInt64
		deadline, leased              sql.NullInt64
		workers                       string
	)
	err := r.Scan(&t.ID, &t.JobID, &kind, &t.Workload, &t.ChunkIndex, &state, &t.Attempt, &t.MaxAttempts,
		&t.LeaseSeconds, &t.LeaseOwner, &expires, &runAfter, &t.Priority, &jobCreated, &t.InputURI, &t.InputSHA256,
		&t.InputBytes, &t.Result, &metrics, &t.Error, &t.DownstreamID, &t.PendingUpstreams, &created, &updated,
		&finished, &t.Version, &t.InputOffset, &t.InputLength, &t.TimeoutSeconds, &deadline, &t.Owner, &leased, &workers, &t.Voters, &ballots, &second)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("read task row: %w", err)
	}
	t.Kind, t.State, t.Metrics, t.Workers = domain.TaskKind(kind), domain.TaskState(state), metrics, domain.WorkerMode(workers)
	t.LeaseExpiresAt, t.RunAfter, t.JobCreatedAt = timeOf(expires), timeOf(runAfter), timeOf(jobCreated)
	t.CreatedAt, t.UpdatedAt, t.FinishedAt = timeOf(created), timeOf(updated), timeOf(finished)
	t.AttemptDeadline, t.LeasedAt = timeOf(deadline), timeOf(leased)
	if t.Ballots, err = store.DecodeBallots(ballots); err != nil {
		return nil, fmt.Errorf("read task %s: %w", t.ID, err)
	}
	if t.Second, err = store.DecodeSecondLease(second); err != nil {
		return nil, fmt.Errorf("read task %s: %w", t.ID, err)
	}
	return &t, nil
}
