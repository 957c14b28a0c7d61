package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// jobColumns are the jobs columns in the order scanJob reads them.
const jobColumns = `id, name, workload, parameters, chunk_rows, has_header, top_k,
	score_column, sort_order, max_attempts, lease_seconds, priority, status, error,
	root_task_id, chunk_count, idempotency_key, request_hash, result, result_sha256,
	created_at, updated_at, finished_at, version, upload_id, input_header, timeout_seconds, creating, owner, workers, quorum, columns, id_column, no_cache, cached, speculate_after, cache_version`

// jobSelectColumns are jobColumns as reads select them: the final CSV's
// size in place of the CSV, which only JobResultRead reads. octet_length
// of a value stored out of line reads its TOAST pointer, which holds the
// size, not the value.
var jobSelectColumns = strings.Replace(jobColumns, "request_hash, result,",
	"request_hash, coalesce(octet_length(result), 0)::bigint,", 1)

var (
	// ON CONFLICT DO NOTHING reports a taken ID or idempotency key as zero
	// rows instead of an error that would abort the caller's transaction.
	sqlJobInsert = `INSERT INTO jobs (` + jobColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37)
ON CONFLICT DO NOTHING`

	sqlJobGet = `SELECT ` + jobSelectColumns + ` FROM jobs WHERE id = $1`

	sqlJobGetByIdempotencyKey = `SELECT ` + jobSelectColumns + ` FROM jobs WHERE owner = $1 AND idempotency_key = $2`

	// JobList in eight forms (everyone's or one owner's; any status or
	// one; from the start or after a cursor), each a plain range scan of
	// jobs_created, jobs_status_created or their owner's forms. A NULL
	// limit is no limit.
	sqlJobList = jobListStatements()

	sqlJobUpdate = `UPDATE jobs
SET status = $2, error = $3, result = COALESCE($4, result), result_sha256 = $5, updated_at = $6,
	finished_at = $7, version = version + 1
WHERE id = $1 AND version = $8`

	sqlJobExists = `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`

	// A slice of a value stored out of line and uncompressed reads only the
	// TOAST chunks it spans (migration 0013 stores results so); a
	// compressed one is decompressed from its start to the slice's end.
	sqlJobResultRead = `SELECT substring(result FROM $2 FOR $3) FROM jobs WHERE id = $1`
)

// JobInsert inserts j at version j.Version+1 and sets j.ResultBytes to the
// length of its Result. A taken ID or idempotency key is
// store.ErrDuplicate, and leaves a transaction usable.
func (q *querier) JobInsert(ctx context.Context, j *domain.Job) error {
	normTime(&j.CreatedAt)
	normTime(&j.UpdatedAt)
	normTime(&j.FinishedAt)
	params := string(j.Parameters)
	if len(j.Parameters) == 0 {
		params = "{}"
	}
	tag, err := q.db.Exec(ctx, sqlJobInsert,
		j.ID, j.Name, j.Workload, params, j.ChunkRows, j.HasHeader, j.TopK,
		j.ScoreColumn, string(j.Order), j.MaxAttempts, j.LeaseSeconds, j.Priority, string(j.Status), j.Error,
		j.RootTaskID, j.ChunkCount, textArg(j.IdempotencyKey), j.RequestHash, bytesArg(j.Result), j.ResultSHA256,
		timeArg(j.CreatedAt), timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.Version+1,
		j.UploadID, bytesArg(j.InputHeader), j.TimeoutSeconds, j.Creating, j.Owner, string(j.Workers), j.Quorum,
		store.EncodeColumns(j.Columns), j.IDColumn, j.NoCache, j.Cached, j.SpeculateAfter, j.CacheVersion)
	if err != nil {
		return translate(err, "insert job %s", j.ID)
	}
	if tag.RowsAffected() == 0 {
		return translate(store.ErrDuplicate, "insert job %s: its ID or idempotency key is taken", j.ID)
	}
	j.ResultBytes = int64(len(j.Result))
	j.Version++
	return nil
}

// JobGet returns the job with id, or store.ErrNotFound.
func (q *querier) JobGet(ctx context.Context, id string) (*domain.Job, error) {
	j, err := scanJob(q.db.QueryRow(ctx, sqlJobGet, id))
	if err != nil {
		return nil, translate(err, "get job %s", id)
	}
	return j, nil
}

// JobGetByIdempotencyKey returns the job created with key, or
// store.ErrNotFound.
func (q *querier) JobGetByIdempotencyKey(ctx context.Context, owner, key string) (*domain.Job, error) {
	if key == "" {
		return nil, translate(store.ErrNotFound, "get job by idempotency key: no key")
	}
	j, err := scanJob(q.db.QueryRow(ctx, sqlJobGetByIdempotencyKey, owner, key))
	if err != nil {
		return nil, translate(err, "get job by idempotency key")
	}
	return j, nil
}

// maxBytea is the size of the largest bytea value, and so the most a
// result read can return; substring takes int4 positions.
const maxBytea = 1 << 30

// JobResultRead returns at most p.Limit bytes of job p.ID's final CSV from
// p.Offset on, or store.ErrNotFound.
func (q *querier) JobResultRead(ctx context.Context, p *store.JobResultReadParams) ([]byte, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return nil, fmt.Errorf("postgres: read result of job %s: negative range (offset %d, limit %d)", p.ID, p.Offset, p.Limit)
	}
	// Past maxBytea there is nothing, but the job may still be missing.
	start := min(p.Offset, maxBytea) + 1
	limit := min(p.Limit, maxBytea)
	var b []byte
	if err := q.db.QueryRow(ctx, sqlJobResultRead, p.ID, int32(start), int32(limit)).Scan(&b); err != nil {
		return nil, translate(err, "read result of job %s at %d", p.ID, p.Offset)
	}
	return b, nil
}

// JobList returns jobs newest first (CreatedAt, then ID, descending). A
// Limit of 0 or less is no limit.
func (q *querier) JobList(ctx context.Context, p *store.JobListParams) ([]*domain.Job, error) {
	args := []any{limitArg(p.Limit)}
	if p.Owner != "" {
		args = append(args, p.Owner)
	}
	if p.Status != "" {
		args = append(args, string(p.Status))
	}
	if p.After != nil {
		args = append(args, p.After.CreatedAt, p.After.ID)
	}
	rows, err := q.db.Query(ctx, sqlJobList[jobListForm{owner: p.Owner != "", status: p.Status != "", after: p.After != nil}], args...)
	if err != nil {
		return nil, translate(err, "list jobs")
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*domain.Job, error) { return scanJob(row) })
	if err != nil {
		return nil, translate(err, "list jobs")
	}
	return jobs, nil
}

// jobListForm is which of JobList's filters a query has.
type jobListForm struct{ owner, status, after bool }

// jobListStatements writes JobList's query in each of its forms; $1 is
// the limit, the filters' parameters follow in the order of jobListForm.
func jobListStatements() map[jobListForm]string {
	m := make(map[jobListForm]string)
	for _, owner := range []bool{false, true} {
		for _, status := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				where, n := []string{"NOT creating"}, 1
				param := func() string { n++; return "$" + strconv.Itoa(n) }
				if owner {
					where = append(where, "owner = "+param())
				}
				if status {
					where = append(where, "status = "+param())
				}
				if after {
					where = append(where, "(created_at, id) < ("+param()+", "+param()+")")
				}
				m[jobListForm{owner, status, after}] = `SELECT ` + jobSelectColumns + ` FROM jobs
WHERE ` + strings.Join(where, " AND ") + `
ORDER BY created_at DESC, id DESC LIMIT $1`
			}
		}
	}
	return m
}

// JobUpdate writes j's mutable fields where the stored version equals
// j.Version, and bumps the version; otherwise store.ErrStale, or
// store.ErrNotFound when the job is gone.
func (q *querier) JobUpdate(ctx context.Context, j *domain.Job) error {
	normTime(&j.UpdatedAt)
	normTime(&j.FinishedAt)
	tag, err := q.db.Exec(ctx, sqlJobUpdate, j.ID, string(j.Status), j.Error, bytesArg(j.Result),
		j.ResultSHA256, timeArg(j.UpdatedAt), timeArg(j.FinishedAt), j.Version)
	if err != nil {
		return translate(err, "update job %s", j.ID)
	}
	if tag.RowsAffected() == 0 {
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
func (q *querier) missing(ctx context.Context, existsSQL, what, id string, version int64) error {
	var exists bool
	if err := q.db.QueryRow(ctx, existsSQL, id).Scan(&exists); err != nil {
		return translate(err, "update %s %s", what, id)
	}
	if !exists {
		return translate(store.ErrNotFound, "update %s %s", what, id)
	}
	return translate(store.ErrStale, "update %s %s: it changed since version %d", what, id, version)
}

// scanJob reads a row of jobColumns.
func scanJob(row pgx.Row) (*domain.Job, error) {
	var (
		j                          domain.Job
		params, order, status      string
		workers, columns           string
		key                        *string
		created, updated, finished pgtype.Timestamptz
	)
	err := row.Scan(&j.ID, &j.Name, &j.Workload, &params, &j.ChunkRows, &j.HasHeader, &j.TopK,
		&j.ScoreColumn, &order, &j.MaxAttempts, &j.LeaseSeconds, &j.Priority, &status, &j.Error,
		&j.RootTaskID, &j.ChunkCount, &key, &j.RequestHash, &j.ResultBytes, &j.ResultSHA256,
		&created, &updated, &finished, &j.Version, &j.UploadID, &j.InputHeader, &j.TimeoutSeconds, &j.Creating, &j.Owner, &workers, &j.Quorum, &columns, &j.IDColumn, &j.NoCache, &j.Cached, &j.SpeculateAfter, &j.CacheVersion)
	if err != nil {
		return nil, err
	}
	if j.Columns, err = store.DecodeColumns(columns); err != nil {
		return nil, err
	}
	j.Parameters, j.Workers = json.RawMessage(params), domain.WorkerMode(workers)
	j.Order = domain.Order(order)
	j.Status = domain.JobStatus(status)
	if key != nil {
		j.IdempotencyKey = *key
	}
	j.CreatedAt, j.UpdatedAt, j.FinishedAt = timeOf(created), timeOf(updated), timeOf(finished)
	return &j, nil
}
