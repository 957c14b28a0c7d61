package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// taskColumns are the tasks columns in the order scanTask reads them and
// TaskInsert writes them.
const taskColumns = `id, job_id, kind, workload, chunk_index, state, attempt, max_attempts,
	lease_seconds, lease_owner, lease_expires_at, run_after, priority, job_created_at,
	input_uri, input_sha256, input_bytes, result, metrics, error, downstream_id,
	pending_upstreams, created_at, updated_at, finished_at, version, input_offset, input_length,
	timeout_seconds, attempt_deadline, owner, leased_at, workers, voters, ballots, second_lease`

// taskColumnNames are taskColumns as a list, for COPY.
var taskColumnNames = strings.Fields(strings.ReplaceAll(taskColumns, ",", " "))

// everyState joins one query per task state with UNION ALL: branch, with
// %s for the state.
func everyState(branch string) string {
	parts := make([]string, len(domain.TaskStates))
	for i, st := range domain.TaskStates {
		parts[i] = fmt.Sprintf(branch, st)
	}
	return strings.Join(parts, "\nUNION ALL ")
}

// taskListColumns are taskColumns as lists select them: without the
// chunk output, which only TaskGet (and the stitcher's TaskResultList) reads.
var taskListColumns = strings.Replace(taskColumns, "input_bytes, result,", "input_bytes, NULL,", 1)

var (
	sqlTaskGet          = `SELECT ` + taskColumns + ` FROM tasks WHERE id = $1`
	sqlTaskLockMany     = sqlTaskGetMany + ` ORDER BY id FOR UPDATE`
	sqlTaskLockVersions = `SELECT id, version FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`

	// TaskList with and without a state; both read tasks_job in chunk
	// order: with a state, its range; without, the ranges of every state,
	// merged (each as long as a page at most). A NULL limit is no limit.
	sqlTaskList = `SELECT ` + taskListColumns + ` FROM (` + everyState(`(SELECT * FROM tasks
	WHERE job_id = $1 AND kind = $2 AND state = '%s' AND chunk_index > $3::bigint
	ORDER BY chunk_index LIMIT $4)`) + `) AS t
ORDER BY chunk_index LIMIT $4`
	sqlTaskListState = `SELECT ` + taskListColumns + ` FROM tasks
WHERE job_id = $1 AND kind = $2 AND chunk_index > $3::bigint AND state = $5
ORDER BY chunk_index LIMIT $4`

	sqlTaskUpdate = `UPDATE tasks
SET state = $2, attempt = $3, lease_owner = $4, lease_expires_at = $5, run_after = $6,
	result = COALESCE($7, result), metrics = $8, error = $9, pending_upstreams = $10, updated_at = $11,
	finished_at = $12, max_attempts = $14, attempt_deadline = $15, leased_at = $16, ballots = $17, voters = $18, second_lease = $19, version = version + 1
WHERE id = $1 AND version = $13`

	sqlTaskUpdateMany = `UPDATE tasks AS t
SET state = u.state, attempt = u.attempt, lease_owner = u.lease_owner, lease_expires_at = u.lease_expires_at,
	run_after = u.run_after, result = COALESCE(u.result, t.result), metrics = u.metrics, error = u.error,
	pending_upstreams = u.pending_upstreams, updated_at = u.updated_at, finished_at = u.finished_at,
	max_attempts = u.max_attempts, attempt_deadline = u.attempt_deadline, leased_at = u.leased_at,
	ballots = u.ballots, voters = u.voters, second_lease = u.second_lease, version = t.version + 1
FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::timestamptz[], $6::timestamptz[],
	$7::bytea[], $8::bytea[], $9::text[], $10::integer[], $11::timestamptz[], $12::timestamptz[], $13::bigint[], $14::integer[],
	$15::timestamptz[], $16::timestamptz[], $17::jsonb[], $18::text[], $19::jsonb[])
	AS u(id, state, attempt, lease_owner, lease_expires_at, run_after, result, metrics, error, pending_upstreams,
		updated_at, finished_at, version, max_attempts, attempt_deadline, leased_at, ballots, voters, second_lease)
WHERE t.id = u.id AND t.version = u.version
RETURNING t.id`

	sqlTaskGetMany = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ANY($1)`

	sqlTaskExists = `SELECT EXISTS (SELECT 1 FROM tasks WHERE id = $1)`

	sqlTaskRetryJob = `UPDATE tasks
SET state = 'pending', attempt = GREATEST(attempt, COALESCE((second_lease ->> 'a')::int, 0)),
	max_attempts = GREATEST(attempt, COALESCE((second_lease ->> 'a')::int, 0)) + $2, run_after = NULL, lease_expires_at = NULL, second_lease = NULL,
	finished_at = NULL, updated_at = $3, version = version + 1
WHERE job_id = $1 AND kind = 'chunk' AND state IN ('failed', 'cancelled')`

	sqlTaskCancelJob = `UPDATE tasks
SET state = 'cancelled', lease_expires_at = NULL, updated_at = $3, finished_at = $3,
	version = version + 1
WHERE job_id = $1 AND state IN ('waiting', 'pending', 'leased') AND id <> $2`

	// One statement, so concurrent completions of a job's upstreams, which
	// all hit this row, queue on its row lock and each see the last count.
	sqlTaskDecrementUpstreams = `UPDATE tasks
SET pending_upstreams = pending_upstreams - $2,
	state = CASE WHEN state = 'waiting' AND pending_upstreams - $2 <= 0 THEN 'pending' ELSE state END,
	updated_at = $3, version = version + 1
WHERE id = $1
RETURNING ` + taskColumns

	sqlTaskResultList = `SELECT chunk_index, result FROM tasks
WHERE job_id = $1 AND kind = 'chunk' AND state = 'completed' AND chunk_index > $2
ORDER BY chunk_index LIMIT $3`

	sqlTaskListExpired = `SELECT ` + taskListColumns + ` FROM tasks
WHERE state = 'leased' AND lease_expires_at <= $1
ORDER BY lease_expires_at
LIMIT $2`

	sqlTaskCountByJob = `SELECT job_id, state, count(*) FROM tasks
WHERE job_id = ANY($1) AND kind = 'chunk'
GROUP BY job_id, state`
)

// TaskInsert inserts tasks, all or none, each at version Version+1: a few
// in a transaction with one INSERT (insertTaskValues), others with one
// COPY. A taken ID is store.ErrDuplicate; the transaction it runs in stays
// usable after it.
func (q *querier) TaskInsert(ctx context.Context, tasks []*domain.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	for _, t := range tasks {
		normTime(&t.LeaseExpiresAt)
		normTime(&t.RunAfter)
		normTime(&t.JobCreatedAt)
		normTime(&t.CreatedAt)
		normTime(&t.UpdatedAt)
		normTime(&t.FinishedAt)
		normTime(&t.AttemptDeadline)
		normTime(&t.LeasedAt)
		domain.NormRunAfter(t)
	}
	var err error
	if q.tx != nil && len(tasks) <= insertValuesMax {
		err = q.insertTaskValues(ctx, tasks)
	} else {
		err = q.atomically(ctx, func(db dbtx) error { return copyTasks(ctx, db, tasks) })
	}
	if err != nil {
		return translate(err, "insert %d tasks (first %s)", len(tasks), tasks[0].ID)
	}
	for _, t := range tasks {
		t.Version++
	}
	if q.inserts.add(len(tasks), time.Now()) {
		if q.tx != nil {
			q.analyze = true // after the commit, when the rows are visible
		} else {
			q.analyzeTasks(ctx)
		}
	}
	return nil
}

// copyTasks writes tasks with one COPY, which is atomic on its own.
func copyTasks(ctx context.Context, db dbtx, tasks []*domain.Task) error {
	// COPY encodes each row before asking for the next, so one slice serves.
	row := make([]any, len(taskColumnNames))
	src := pgx.CopyFromSlice(len(tasks), func(i int) ([]any, error) {
		taskRow(row, tasks[i])
		return row, nil
	})
	_, err := db.CopyFrom(ctx, pgx.Identifier{"tasks"}, taskColumnNames, src)
	return err
}

// taskRow fills row with the values of t's columns, in taskColumns'
// order, at version Version+1.
func taskRow(row []any, t *domain.Task) {
	row[0], row[1], row[2], row[3], row[4] = t.ID, t.JobID, string(t.Kind), t.Workload, t.ChunkIndex
	row[5], row[6], row[7], row[8], row[9] = string(t.State), t.Attempt, t.MaxAttempts, t.LeaseSeconds, t.LeaseOwner
	row[10], row[11], row[12], row[13] = timeArg(t.LeaseExpiresAt), timeArg(t.RunAfter), t.Priority, timeArg(t.JobCreatedAt)
	row[14], row[15], row[16], row[17], row[18] = t.InputURI, t.InputSHA256, t.InputBytes, bytesArg(t.Result), bytesArg(t.Metrics)
	row[19], row[20], row[21] = t.Error, t.DownstreamID, t.PendingUpstreams
	row[22], row[23], row[24], row[25] = timeArg(t.CreatedAt), timeArg(t.UpdatedAt), timeArg(t.FinishedAt), t.Version+1
	row[26], row[27], row[28], row[29] = t.InputOffset, t.InputLength, t.TimeoutSeconds, timeArg(t.AttemptDeadline)
	row[30], row[31], row[32], row[33] = t.Owner, timeArg(t.LeasedAt), string(t.Workers), t.Voters
	row[34], row[35] = jsonbArg(store.EncodeBallots(t.Ballots)), jsonbArg(store.EncodeSecondLease(t.Second))
}

// insertValuesMax is the most tasks a transaction inserts with one
// INSERT; more go by COPY, whose savepoint and protocol cost four round
// trips against one (a vote's replicas took 1.7 ms that way).
const insertValuesMax = 64

// sqlTaskInsertValues[n] inserts n tasks, passing over taken IDs, and
// returns the IDs it inserted.
var sqlTaskInsertValues = func() (out [insertValuesMax + 1]string) {
	cols := len(taskColumnNames)
	for n := 1; n <= insertValuesMax; n++ {
		var b strings.Builder
		b.WriteString("INSERT INTO tasks (" + taskColumns + ") VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for c := range cols {
				if c > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "$%d", i*cols+c+1)
			}
			b.WriteString(")")
		}
		b.WriteString(" ON CONFLICT (id) DO NOTHING RETURNING id")
		out[n] = b.String()
	}
	return out
}()

// insertTaskValues inserts a few tasks in q's transaction with one
// statement and no savepoint: a taken ID is passed over rather than
// aborting the transaction, and when one was, the rows written are
// deleted again and it is store.ErrDuplicate.
func (q *querier) insertTaskValues(ctx context.Context, tasks []*domain.Task) error {
	cols := len(taskColumnNames)
	args := make([]any, len(tasks)*cols)
	for i, t := range tasks {
		taskRow(args[i*cols:(i+1)*cols], t)
	}
	rows, err := q.db.Query(ctx, sqlTaskInsertValues[len(tasks)], args...)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == len(tasks) {
		return err
	}
	if len(ids) > 0 {
		if _, err := q.db.Exec(ctx, `DELETE FROM tasks WHERE id = ANY($1)`, ids); err != nil {
			return err
		}
	}
	return fmt.Errorf("%d of %d task IDs taken: %w", len(tasks)-len(ids), len(tasks), store.ErrDuplicate)
}

// analyzeAfter is how many inserted tasks make the store refresh the
// planner's statistics of tasks at once instead of waiting for autovacuum
// (a minute or more). Until then the planner may think pending tasks rare,
// and a claim may sort every pending task instead of reading the first
// entries of tasks_claim: with 100,000 pending tasks a claim took ~40 ms
// that way, against ~0.3 ms (BenchmarkTaskClaim). They are counted over
// inserts, since a job's tasks come in batches smaller than this
// (engine.CreateBatch); analyzeEvery spaces the refreshes, so that a job
// of a million tasks pays for a few, not one per two batches.
const (
	analyzeAfter = 10_000
	analyzeEvery = 10 * time.Second
)

// insertCount counts the tasks inserted since the statistics were last
// refreshed.
type insertCount struct {
	refresh func()        // refreshes them on the pool, for a refresh owed
	every   time.Duration // analyzeEvery, but for tests

	mu     sync.Mutex
	n      int
	last   time.Time   // of the last refresh asked for
	owed   *time.Timer // a refresh put off by every, when it ends
	closed bool
}

// add counts n inserted tasks and reports whether the statistics should
// be refreshed now: analyzeAfter or more since the last refresh, and that
// refresh every ago or more. A refresh due sooner is put off, not
// dropped: it runs (refresh) once every has passed, so that the last job
// of a burst gets its statistics too.
func (c *insertCount) add(n int, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += n
	if c.n < analyzeAfter {
		return false
	}
	if wait := c.every - now.Sub(c.last); wait > 0 {
		if c.owed == nil && !c.closed {
			c.owed = time.AfterFunc(wait, c.payOwed)
		}
		return false
	}
	c.n, c.last = 0, now
	return true
}

// payOwed runs the refresh that add put off, unless one ran since.
func (c *insertCount) payOwed() {
	c.mu.Lock()
	c.owed = nil
	if c.closed || c.n < analyzeAfter {
		c.mu.Unlock()
		return
	}
	c.n, c.last = 0, time.Now()
	c.mu.Unlock()
	c.refresh()
}

// stop drops a refresh owed: the store is closing.
func (c *insertCount) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.owed != nil {
		c.owed.Stop()
		c.owed = nil
	}
}

const sqlTaskAnalyze = `ANALYZE tasks`

// analyzeTasks refreshes the statistics of tasks. It is an optimisation:
// errors (a role that does not own the table only gets a warning) are
// ignored, and the insert that asked for it has succeeded anyway.
func (q *querier) analyzeTasks(ctx context.Context) {
	_, _ = q.db.Exec(ctx, sqlTaskAnalyze)
}

// TaskGet returns the task with id, or store.ErrNotFound.
func (q *querier) TaskGet(ctx context.Context, id string) (*domain.Task, error) {
	t, err := scanTask(q.db.QueryRow(ctx, sqlTaskGet, id))
	if err != nil {
		return nil, translate(err, "get task %s", id)
	}
	return t, nil
}

// TaskList returns a job's tasks of one kind by ChunkIndex ascending. A
// Limit of 0 or less is no limit.
func (q *querier) TaskList(ctx context.Context, p *store.TaskListParams) ([]*domain.Task, error) {
	limit := limitArg(p.Limit)
	after := int64(p.AfterIndex)
	if after < 0 {
		after = math.MinInt64 // from the start, the stitch task's -1 included
	}
	var rows pgx.Rows
	var err error
	if p.State == "" {
		rows, err = q.db.Query(ctx, sqlTaskList, p.JobID, string(p.Kind), after, limit)
	} else {
		rows, err = q.db.Query(ctx, sqlTaskListState, p.JobID, string(p.Kind), after, limit, string(p.State))
	}
	if err != nil {
		return nil, translate(err, "list %s tasks of job %s", p.Kind, p.JobID)
	}
	return collectTasks(rows, "list %s tasks of job %s", p.Kind, p.JobID)
}

// TaskGetMany returns the tasks of ids that exist, in one statement.
func (q *querier) TaskGetMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlTaskGetMany, ids)
	if err != nil {
		return nil, translate(err, "get %d tasks", len(ids))
	}
	return collectTasks(rows, "get %d tasks", len(ids))
}

// TaskLockMany returns tasks and locks their rows, in ID order, until the
// transaction ends.
func (q *querier) TaskLockMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlTaskLockMany, ids)
	if err != nil {
		return nil, translate(err, "lock %d tasks", len(ids))
	}
	return collectTasks(rows, "lock %d tasks", len(ids))
}

// TaskLockVersions locks the rows of ids, in ID order, until the
// transaction ends, and returns their versions.
func (q *querier) TaskLockVersions(ctx context.Context, ids []string) (map[string]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlTaskLockVersions, ids)
	if err != nil {
		return nil, translate(err, "lock %d tasks", len(ids))
	}
	return collectByKey[int64](rows, "lock %d tasks", len(ids))
}

// collectByKey reads rows of (key, number): a task's ID and version, an
// account and a count.
func collectByKey[V int | int64](rows pgx.Rows, format string, args ...any) (map[string]V, error) {
	out := map[string]V{}
	var (
		k string
		v V
	)
	_, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		out[k] = v
		return nil
	})
	if err != nil {
		return nil, translate(err, format, args...)
	}
	return out, nil
}

// TaskUpdate writes t's mutable fields where the stored version equals
// t.Version, and bumps the version; otherwise store.ErrStale, or
// store.ErrNotFound when the task is gone.
func (q *querier) TaskUpdate(ctx context.Context, t *domain.Task) error {
	tag, err := q.db.Exec(ctx, sqlTaskUpdate, taskUpdateArgs(t)...)
	if err != nil {
		return translate(err, "update task %s", t.ID)
	}
	if tag.RowsAffected() == 0 {
		return q.missing(ctx, sqlTaskExists, "task", t.ID, t.Version)
	}
	t.Version++
	return nil
}

// TaskUpdateMany is TaskUpdate of each task in one statement: the rows'
// new values come as arrays, one element per task, and each row is written
// only where its version is the one read. A task may appear once.
func (q *querier) TaskUpdateMany(ctx context.Context, tasks []*domain.Task) error {
	switch len(tasks) {
	case 0:
		return nil
	case 1:
		return q.TaskUpdate(ctx, tasks[0])
	}
	n := len(tasks)
	var (
		ids, states, owners, errs       = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		attempts, pending, maxAttempts  = make([]int32, n), make([]int32, n), make([]int32, n)
		versions                        = make([]int64, n)
		expires, runAfter, updated, fin = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		deadlines, leased               = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		results, metrics, ballots       = make([][]byte, n), make([][]byte, n), make([]any, n)
		seconds                         = make([]any, n)
		voters                          = make([]string, n)
	)
	ts := func(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }
	for i, t := range tasks {
		normTaskTimes(t)
		ids[i], states[i], owners[i], errs[i] = t.ID, string(t.State), t.LeaseOwner, t.Error
		attempts[i], pending[i], maxAttempts[i] = int32(t.Attempt), int32(t.PendingUpstreams), int32(t.MaxAttempts)
		versions[i] = t.Version
		expires[i], runAfter[i], updated[i], fin[i] = ts(t.LeaseExpiresAt), ts(t.RunAfter), ts(t.UpdatedAt), ts(t.FinishedAt)
		deadlines[i], leased[i] = ts(t.AttemptDeadline), ts(t.LeasedAt)
		results[i], metrics[i] = t.Result, t.Metrics
		ballots[i], voters[i] = jsonbArg(store.EncodeBallots(t.Ballots)), t.Voters
		seconds[i] = jsonbArg(store.EncodeSecondLease(t.Second))
	}
	rows, err := q.db.Query(ctx, sqlTaskUpdateMany, ids, states, attempts, owners, expires, runAfter,
		results, metrics, errs, pending, updated, fin, versions, maxAttempts, deadlines, leased, ballots, voters, seconds)
	if err != nil {
		return translate(err, "update %d tasks", n)
	}
	written, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return translate(err, "update %d tasks", n)
	}
	if len(written) < n {
		for _, t := range tasks {
			if !slices.Contains(written, t.ID) {
				return q.missing(ctx, sqlTaskExists, "task", t.ID, t.Version)
			}
		}
	}
	for _, t := range tasks {
		t.Version++
	}
	return nil
}

// normTaskTimes sets t's mutable times as they are stored.
func normTaskTimes(t *domain.Task) {
	normTime(&t.LeaseExpiresAt)
	normTime(&t.RunAfter)
	normTime(&t.UpdatedAt)
	normTime(&t.FinishedAt)
	normTime(&t.AttemptDeadline)
	normTime(&t.LeasedAt)
	domain.NormRunAfter(t)
}

// taskUpdateArgs normalizes t's times as stored and returns the arguments
// of sqlTaskUpdate.
func taskUpdateArgs(t *domain.Task) []any {
	normTaskTimes(t)
	return []any{t.ID, string(t.State), t.Attempt, t.LeaseOwner,
		timeArg(t.LeaseExpiresAt), timeArg(t.RunAfter), bytesArg(t.Result), bytesArg(t.Metrics), t.Error,
		t.PendingUpstreams, timeArg(t.UpdatedAt), timeArg(t.FinishedAt), t.Version, t.MaxAttempts,
		timeArg(t.AttemptDeadline), timeArg(t.LeasedAt), jsonbArg(store.EncodeBallots(t.Ballots)), t.Voters, jsonbArg(store.EncodeSecondLease(t.Second))}
}

// TaskRetryJob puts the job's failed and cancelled chunk tasks back to
// pending with p.MaxAttempts more attempts, and returns how many it moved.
func (q *querier) TaskRetryJob(ctx context.Context, p *store.TaskRetryJobParams) (int, error) {
	now := p.Now
	normTime(&now)
	tag, err := q.db.Exec(ctx, sqlTaskRetryJob, p.JobID, p.MaxAttempts, now)
	if err != nil {
		return 0, translate(err, "retry tasks of job %s", p.JobID)
	}
	return int(tag.RowsAffected()), nil
}

// TaskCancelJob moves every task of job p.JobID that is waiting, pending or
// leased, except the one with ID p.Except, to cancelled at p.Now (clearing
// its lease expiry) and returns how many it moved.
func (q *querier) TaskCancelJob(ctx context.Context, p *store.TaskCancelJobParams) (int, error) {
	tag, err := q.db.Exec(ctx, sqlTaskCancelJob, p.JobID, p.Except, p.Now)
	if err != nil {
		return 0, translate(err, "cancel tasks of job %s", p.JobID)
	}
	return int(tag.RowsAffected()), nil
}

// TaskDecrementUpstreams records that n upstreams of task id completed, in one
// atomic statement, and returns the task as written (store.ErrNotFound when
// there is none).
func (q *querier) TaskDecrementUpstreams(ctx context.Context, p *store.TaskDecrementUpstreamsParams) (*domain.Task, error) {
	t, err := scanTask(q.db.QueryRow(ctx, sqlTaskDecrementUpstreams, p.ID, p.N, p.Now))
	if err != nil {
		return nil, translate(err, "record %d upstreams of task %s done", p.N, p.ID)
	}
	return t, nil
}

// TaskResultList returns a page of the outputs of a job's completed chunk
// tasks by ChunkIndex ascending.
func (q *querier) TaskResultList(ctx context.Context, p *store.TaskResultListParams) ([]store.ChunkResult, error) {
	rows, err := q.db.Query(ctx, sqlTaskResultList, p.JobID, p.AfterIndex, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "read results of job %s after chunk %d", p.JobID, p.AfterIndex)
	}
	var out []store.ChunkResult
	var r store.ChunkResult
	_, err = pgx.ForEachRow(rows, []any{&r.ChunkIndex, &r.Result}, func() error {
		out = append(out, r)
		r.Result = nil // the next row scans into a fresh slice
		return nil
	})
	if err != nil {
		return nil, translate(err, "read results of job %s after chunk %d", p.JobID, p.AfterIndex)
	}
	return out, nil
}

// TaskListExpired returns the leased tasks whose lease expired at or before
// p.Now, oldest expiry first, at most p.Limit of them (all when 0 or less).
func (q *querier) TaskListExpired(ctx context.Context, p *store.TaskListExpiredParams) ([]*domain.Task, error) {
	rows, err := q.db.Query(ctx, sqlTaskListExpired, p.Now, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired leases")
	}
	return collectTasks(rows, "list expired leases")
}

// TaskCountByJob counts each listed job's chunk tasks by state, in one
// statement.
func (q *querier) TaskCountByJob(ctx context.Context, jobIDs []string) (map[string]domain.TaskCounts, error) {
	out := make(map[string]domain.TaskCounts, len(jobIDs))
	if len(jobIDs) == 0 {
		return out, nil
	}
	rows, err := q.db.Query(ctx, sqlTaskCountByJob, jobIDs)
	if err != nil {
		return nil, translate(err, "count tasks of %d jobs", len(jobIDs))
	}
	var id, state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &n}, func() error {
		c := out[id]
		c.Add(domain.TaskState(state), n)
		out[id] = c
		return nil
	})
	if err != nil {
		return nil, translate(err, "count tasks of %d jobs", len(jobIDs))
	}
	return out, nil
}

// collectTasks reads rows of taskColumns; format and args describe the
// operation for errors.
func collectTasks(rows pgx.Rows, format string, args ...any) ([]*domain.Task, error) {
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*domain.Task, error) { return scanTask(row) })
	if err != nil {
		return nil, translate(err, format, args...)
	}
	return tasks, nil
}

// scanTask reads a row of taskColumns.
func scanTask(row pgx.Row) (*domain.Task, error) {
	var (
		t                                  domain.Task
		kind, state                        string
		leaseExpires, runAfter, jobCreated pgtype.Timestamptz
		created, updated, finished         pgtype.Timestamptz
		deadline, leased                   pgtype.Timestamptz
		metrics, ballots, second           []byte
		workers                            string
	)
	err := row.Scan(&t.ID, &t.JobID, &kind, &t.Workload, &t.ChunkIndex, &state, &t.Attempt, &t.MaxAttempts,
		&t.LeaseSeconds, &t.LeaseOwner, &leaseExpires, &runAfter, &t.Priority, &jobCreated,
		&t.InputURI, &t.InputSHA256, &t.InputBytes, &t.Result, &metrics, &t.Error, &t.DownstreamID,
		&t.PendingUpstreams, &created, &updated, &finished, &t.Version, &t.InputOffset, &t.InputLength,
		&t.TimeoutSeconds, &deadline, &t.Owner, &leased, &workers, &t.Voters, &ballots, &second)
	if err != nil {
		return nil, err
	}
	if t.Ballots, err = store.DecodeBallots(ballots); err != nil {
		return nil, fmt.Errorf("read task %s: %w", t.ID, err)
	}
	if t.Second, err = store.DecodeSecondLease(second); err != nil {
		return nil, fmt.Errorf("read task %s: %w", t.ID, err)
	}
	t.Kind, t.Workers = domain.TaskKind(kind), domain.WorkerMode(workers)
	t.State = domain.TaskState(state)
	if metrics != nil {
		t.Metrics = json.RawMessage(metrics)
	}
	t.LeaseExpiresAt, t.RunAfter, t.JobCreatedAt = timeOf(leaseExpires), timeOf(runAfter), timeOf(jobCreated)
	t.CreatedAt, t.UpdatedAt, t.FinishedAt = timeOf(created), timeOf(updated), timeOf(finished)
	t.AttemptDeadline, t.LeasedAt = timeOf(deadline), timeOf(leased)
	return &t, nil
}
