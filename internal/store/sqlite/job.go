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

const jobColumns = `id, name, workload, parameters, chunk_rows, has_header, top_k, score_column, sort_order,
	max_attempts, lease_seconds, priority, status, error, root_task_id, chunk_count, idempotency_key,
	request_hash, result, result_sha256, created_at, updated_at, finished_at, version, upload_id, input_header,
	timeout_seconds, creating, owner, workers, quorum, columns, id_column, no_cache, cached, speculate_after, cache_version`

// jobSelectColumns are jobColumns as reads select them: the final CSV's size in
// place of the CSV, which only JobResultRead reads. length() of a BLOB
// column reads the row's header, not the value's overflow pages.
var jobSelectColumns = strings.Replace(jobColumns, "request_hash, result,", "request_hash, coalesce(length(result), 0),", 1)

var (
	sqlJobInsert = newStatement(`INSERT INTO jobs (` + jobColumns + `) VALUES (` + placeholders(37) + `)`)

	sqlJobGet = newStatement(`SELECT ` + jobSelectColumns + ` FROM jobs WHERE id = ?`)

	sqlJobGetByIdempotencyKey = newStatement(`SELECT ` + jobSelectColumns + ` FROM jobs WHERE owner = ? AND idempotency_key = ?`)

	// JobList in eight forms (everyone's or one owner's; any status or
	// one; from the start or after a cursor), each a plain range scan of
	// jobs_created, jobs_status_created or their owner's forms. LIMIT -1
	// is no limit.
	sqlJobList = jobListStatements()

	sqlJobUpdate = newStatement(`UPDATE jobs SET status = ?, error = ?, result = coalesce(?, result), result_sha256 = ?, updated_at = ?,
	finished_at = ?, version = version + 1 WHERE id = ? AND version = ?`)

	sqlJobExists = newStatement(`SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?)`)

	// substr counts bytes in a BLOB, from 1. SQLite hands a function the
	// whole value (read from its pages, most often in the page cache) and
	// frees it with the statement; only the slice reaches Go.
	sqlJobResultRead = newStatement(`SELECT substr(result, ? + 1, ?) FROM jobs WHERE id = ?`)
)

// jobListForm is which of JobList's filters a query has.
type jobListForm struct{ owner, status, after bool }

// jobListStatements prepares JobList's query in each of its forms.
func jobListStatements() map[jobListForm]*statement {
	m := make(map[jobListForm]*statement)
	for _, owner := range []bool{false, true} {
		for _, status := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				f := jobListForm{owner, status, after}
				m[f] = newStatement(jobListSQL(f))
			}
		}
	}
	return m
}

// jobListSQL builds JobList's query in form f.
func jobListSQL(f jobListForm) string {
	where := []string{"NOT creating"}
	if f.owner {
		where = append(where, "owner = ?")
	}
	if f.status {
		where = append(where, "status = ?")
	}
	if f.after {
		where = append(where, "(created_at, id) < (?, ?)")
	}
	return `SELECT ` + jobSelectColumns + ` FROM jobs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY created_at DESC, id DESC LIMIT ?`
}

// JobInsert inserts j with version j.Version+1 and sets j.Version to it,
// and j.ResultBytes to the length of its Result. A nil Parameters is stored
// as {}. A taken ID or idempotency key is store.ErrDuplicate.
func (q *querier) JobInsert(ctx context.Context, j *domain.Job) error {
	params := string(j.Parameters)
	if j.Parameters == nil {
		params = "{}"
	}
	_, err := q.exec(ctx, sqlJobInsert,
		j.ID, j.Name, j.Workload, params, j.ChunkRows, boolArg(j.HasHeader), j.TopK, j.ScoreColumn, string(j.Order),
		j.MaxAttempts, j.LeaseSeconds, j.Priority, string(j.Status), j.Error, j.RootTaskID, j.ChunkCount,
		textArg(j.IdempotencyKey), j.RequestHash, bytesArg(j.Result), j.ResultSHA256,
		timeArg(j.CreatedAt), timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.Version+1,
		j.UploadID, bytesArg(j.InputHeader), j.TimeoutSeconds, boolArg(j.Creating), j.Owner, string(j.Workers), j.Quorum,
		store.EncodeColumns(j.Columns), j.IDColumn, boolArg(j.NoCache), j.Cached, j.SpeculateAfter, j.CacheVersion)
	if err != nil {
		return translate(err, "insert job %s", j.ID)
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
	err := q.queryRow(ctx, false, func(r scanner) (err error) { j, err = scanJob(r); return err }, sqlJobGet, id)
	if err != nil {
		return nil, translate(err, "get job %s", id)
	}
	return j, nil
}

// JobGetByIdempotencyKey returns the job owner created with key, or
// store.ErrNotFound; no job has the empty key.
func (q *querier) JobGetByIdempotencyKey(ctx context.Context, owner, key string) (*domain.Job, error) {
	var j *domain.Job
	err := q.queryRow(ctx, false, func(r scanner) (err error) { j, err = scanJob(r); return err }, sqlJobGetByIdempotencyKey, owner, key)
	if err != nil {
		return nil, translate(err, "get job by idempotency key")
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
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&b) }, sqlJobResultRead, p.Offset, p.Limit, p.ID)
	if err != nil {
		return nil, translate(err, "read result of job %s at %d", p.ID, p.Offset)
	}
	return b, nil
}

// JobList returns jobs newest first (CreatedAt, then ID, descending). A
// Limit of 0 or less means no limit.
func (q *querier) JobList(ctx context.Context, p *store.JobListParams) ([]*domain.Job, error) {
	var args []any
	if p.Owner != "" {
		args = append(args, p.Owner)
	}
	if p.Status != "" {
		args = append(args, string(p.Status))
	}
	if p.After != nil {
		args = append(args, p.After.CreatedAt.UnixMicro(), p.After.ID)
	}
	args = append(args, limitArg(p.Limit))
	query := sqlJobList[jobListForm{owner: p.Owner != "", status: p.Status != "", after: p.After != nil}]
	var out []*domain.Job
	err := q.query(ctx, false, func(r scanner) error {
		j, err := scanJob(r)
		out = append(out, j)
		return err
	}, query, args...)
	if err != nil {
		return nil, translate(err, "list jobs")
	}
	return out, nil
}

// JobUpdate writes j's mutable fields where the stored version equals
// j.Version, and bumps j.Version; otherwise store.ErrStale, or
// store.ErrNotFound when the job is gone.
func (q *querier) JobUpdate(ctx context.Context, j *domain.Job) error {
	res, err := q.exec(ctx, sqlJobUpdate, string(j.Status), j.Error, bytesArg(j.Result), j.ResultSHA256,
		timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.ID, j.Version)
	if err != nil {
		return translate(err, "update job %s", j.ID)
	}
	if n, err := res.RowsAffected(); err != nil {
		return translate(err, "update job %s", j.ID)
	} else if n == 0 {
		return q.missing(ctx, sqlJobExists, "job", j.ID, j.Version)
	}
	if j.Result != nil {
		j.ResultBytes = int64(len(j.Result))
	}
	j.Version++
	return nil
}

// missing explains a version-guarded write that matched no row:
// store.ErrNotFound when the row is gone, else store.ErrStale.
func (q *querier) missing(ctx context.Context, existsSQL *statement, what, id string, version int64) error {
	var exists bool
	if err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&exists) }, existsSQL, id); err != nil {
		return translate(err, "update %s %s", what, id)
	}
	if !exists {
		return translate(store.ErrNotFound, "update %s %s", what, id)
	}
	return translate(store.ErrStale, "update %s %s: it changed since version %d", what, id, version)
}

func scanJob(r scanner) (*domain.Job, error) {
	var (
		j                          domain.Job
		params, order, status      string
		workers, columns           string
		key                        sql.NullString
		created, updated, finished sql.NullInt64
	)
	err := r.Scan(&j.ID, &j.Name, &j.Workload, &params, &j.ChunkRows, &j.HasHeader, &j.TopK, &j.ScoreColumn, &order,
		&j.MaxAttempts, &j.LeaseSeconds, &j.Priority, &status, &j.Error, &j.RootTaskID, &j.ChunkCount, &key,
		&j.RequestHash, &j.ResultBytes, &j.ResultSHA256, &created, &updated, &finished, &j.Version,
		&j.UploadID, &j.InputHeader, &j.TimeoutSeconds, &j.Creating, &j.Owner, &workers, &j.Quorum, &columns, &j.IDColumn, &j.NoCache, &j.Cached, &j.SpeculateAfter, &j.CacheVersion)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("read job row: %w", err)
	}
	j.Parameters, j.Workers = json.RawMessage(params), domain.WorkerMode(workers)
	if j.Columns, err = store.DecodeColumns(columns); err != nil {
		return nil, fmt.Errorf("read job row: %w", err)
	}
	j.Order, j.Status, j.IdempotencyKey = domain.Order(order), domain.JobStatus(status), key.String
	j.CreatedAt, j.UpdatedAt, j.FinishedAt = timeOf(created), timeOf(updated), timeOf(finished)
	return &j, nil
}
