package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

const jobCols = `id, name, workload, parameters, chunk_rows, has_header, top_k, score_column, sort_order,
	max_attempts, lease_seconds, priority, status, error, root_task_id, chunk_count, idempotency_key,
	request_hash, result, result_sha256, created_at, updated_at, finished_at, version, upload_id, input_header,
	timeout_seconds, creating`

// jobSelectCols are jobCols as reads select them: the final CSV's size in
// place of the CSV, which only JobResultRead reads. length() of a BLOB
// column reads the row's header, not the value's overflow pages.
var jobSelectCols = strings.Replace(jobCols, "request_hash, result,", "request_hash, coalesce(length(result), 0),", 1)

var (
	jobInsertSQL = `INSERT INTO jobs (` + jobCols + `) VALUES (` + placeholders(28) + `)`
	jobGetSQL    = `SELECT ` + jobSelectCols + ` FROM jobs WHERE id = ?`
	jobByKeySQL  = `SELECT ` + jobSelectCols + ` FROM jobs WHERE idempotency_key = ?`
	jobExistsSQL = `SELECT 1 FROM jobs WHERE id = ?`
	// substr counts bytes in a BLOB, from 1. SQLite hands a function the
	// whole value (read from its pages, most often in the page cache) and
	// frees it with the statement; only the slice reaches Go.
	jobResultReadSQL = `SELECT substr(result, ? + 1, ?) FROM jobs WHERE id = ?`
)

const (
	jobUpdateSQL = `UPDATE jobs SET status = ?, error = ?, result = coalesce(?, result), result_sha256 = ?, updated_at = ?,
	finished_at = ?, version = version + 1 WHERE id = ? AND version = ?`
	// The ID list is a JSON array, so one prepared statement serves any
	// number of IDs. The unary + keeps the planner on the primary key
	// rather than the index of every pending job.
	jobMarkRunningSQL = `UPDATE jobs SET status = 'running', updated_at = ?, version = version + 1
	WHERE id IN (SELECT value FROM json_each(?)) AND +status = 'pending'`
)

// jobListSQLs are JobList's queries, by [status filter][cursor].
var jobListSQLs = [2][2]string{
	{jobListSQL(false, false), jobListSQL(false, true)},
	{jobListSQL(true, false), jobListSQL(true, true)},
}

// jobListSQL builds JobList's query; LIMIT -1 is no limit.
func jobListSQL(status, after bool) string {
	where := []string{"NOT creating"}
	if status {
		where = append(where, "status = ?")
	}
	if after {
		where = append(where, "(created_at, id) < (?, ?)")
	}
	return `SELECT ` + jobSelectCols + ` FROM jobs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at DESC, id DESC LIMIT ?`
}

// JobInsert inserts j with version j.Version+1 and sets j.Version to it,
// and j.ResultBytes to the length of its Result. A nil Parameters is stored
// as {}. A taken ID or idempotency key is store.ErrDuplicate.
func (q *querier) JobInsert(ctx context.Context, j *domain.Job) error {
	params := string(j.Parameters)
	if j.Parameters == nil {
		params = "{}"
	}
	_, err := q.exec(ctx, jobInsertSQL,
		j.ID, j.Name, j.Workload, params, j.ChunkRows, boolArg(j.HasHeader), j.TopK, j.ScoreColumn, string(j.Order),
		j.MaxAttempts, j.LeaseSeconds, j.Priority, string(j.Status), j.Error, j.RootTaskID, j.ChunkCount,
		nullString(j.IdempotencyKey), j.RequestHash, blobArg(j.Result), j.ResultSHA256,
		timeArg(j.CreatedAt), timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.Version+1,
		j.UploadID, blobArg(j.InputHeader), j.TimeoutSeconds, boolArg(j.Creating))
	if err != nil {
		return fmt.Errorf("sqlite: insert job %s: %w", j.ID, err)
	}
	if j.Parameters == nil {
		j.Parameters = json.RawMessage(params)
	}
	j.ResultBytes = int64(len(j.Result))
	j.Version++
	return nil
}

// JobGet returns the job with id, or store.ErrNotFound.
func (q *querier) JobGet(ctx context.Context, id string) (*domain.Job, error) {
	var j *domain.Job
	err := q.queryRow(ctx, false, func(r scanner) (err error) { j, err = scanJob(r); return err }, jobGetSQL, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get job %s: %w", id, err)
	}
	return j, nil
}

// JobGetByIdempotencyKey returns the job created with key, or
// store.ErrNotFound; no job has the empty key.
func (q *querier) JobGetByIdempotencyKey(ctx context.Context, key string) (*domain.Job, error) {
	var j *domain.Job
	err := q.queryRow(ctx, false, func(r scanner) (err error) { j, err = scanJob(r); return err }, jobByKeySQL, key)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get job by idempotency key %q: %w", key, err)
	}
	return j, nil
}

// JobResultRead returns at most p.Limit bytes of job p.ID's final CSV from
// p.Offset on, or store.ErrNotFound.
func (q *querier) JobResultRead(ctx context.Context, p *store.JobResultReadParams) ([]byte, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return nil, fmt.Errorf("sqlite: read result of job %s: negative range (offset %d, limit %d)", p.ID, p.Offset, p.Limit)
	}
	var b []byte
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&b) }, jobResultReadSQL, p.Offset, p.Limit, p.ID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read result of job %s at %d: %w", p.ID, p.Offset, err)
	}
	return b, nil
}

// JobList returns jobs newest first (CreatedAt, then ID, descending). A
// Limit of 0 or less means no limit.
func (q *querier) JobList(ctx context.Context, p *store.JobListParams) ([]*domain.Job, error) {
	var args []any
	if p.Status != "" {
		args = append(args, string(p.Status))
	}
	if p.After != nil {
		args = append(args, p.After.CreatedAt.UnixMicro(), p.After.ID)
	}
	args = append(args, limitArg(p.Limit))
	var out []*domain.Job
	err := q.query(ctx, false, func(r scanner) error {
		j, err := scanJob(r)
		out = append(out, j)
		return err
	}, jobListSQLs[boolArg(p.Status != "")][boolArg(p.After != nil)], args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list jobs: %w", err)
	}
	return out, nil
}

// JobUpdate writes j's mutable fields where the stored version equals
// j.Version, and bumps j.Version; otherwise store.ErrStale, or
// store.ErrNotFound when the job is gone.
func (q *querier) JobUpdate(ctx context.Context, j *domain.Job) error {
	res, err := q.exec(ctx, jobUpdateSQL, string(j.Status), j.Error, blobArg(j.Result), j.ResultSHA256,
		timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.ID, j.Version)
	if err == nil {
		err = q.checkGuarded(ctx, res, jobExistsSQL, j.ID)
	}
	if err != nil {
		return fmt.Errorf("sqlite: update job %s at version %d: %w", j.ID, j.Version, err)
	}
	if j.Result != nil {
		j.ResultBytes = int64(len(j.Result))
	}
	j.Version++
	return nil
}

// checkGuarded turns a version-guarded write that changed no row into
// store.ErrStale, or store.ErrNotFound when existsSQL finds no row for id.
func (q *querier) checkGuarded(ctx context.Context, res sql.Result, existsSQL, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	var one int
	err = q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&one) }, existsSQL, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("the stored version differs: %w", store.ErrStale)
}

// JobMarkRunning moves every job of p.IDs that is pending to running at
// p.Now.
func (q *querier) JobMarkRunning(ctx context.Context, p *store.JobMarkRunningParams) error {
	if len(p.IDs) == 0 {
		return nil
	}
	if _, err := q.exec(ctx, jobMarkRunningSQL, timeArg(p.Now), jsonArray(p.IDs)); err != nil {
		return fmt.Errorf("sqlite: mark %d jobs running: %w", len(p.IDs), err)
	}
	return nil
}

func scanJob(r scanner) (*domain.Job, error) {
	var (
		j                          domain.Job
		params, order, status      string
		key                        sql.NullString
		created, updated, finished sql.NullInt64
	)
	err := r.Scan(&j.ID, &j.Name, &j.Workload, &params, &j.ChunkRows, &j.HasHeader, &j.TopK, &j.ScoreColumn, &order,
		&j.MaxAttempts, &j.LeaseSeconds, &j.Priority, &status, &j.Error, &j.RootTaskID, &j.ChunkCount, &key,
		&j.RequestHash, &j.ResultBytes, &j.ResultSHA256, &created, &updated, &finished, &j.Version,
		&j.UploadID, &j.InputHeader, &j.TimeoutSeconds, &j.Creating)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("read job row: %w", err)
	}
	j.Parameters = json.RawMessage(params)
	j.Order, j.Status, j.IdempotencyKey = domain.Order(order), domain.JobStatus(status), key.String
	j.CreatedAt, j.UpdatedAt, j.FinishedAt = timeCol(created), timeCol(updated), timeCol(finished)
	return &j, nil
}
