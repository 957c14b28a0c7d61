package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The statements of retention. A NULL cursor ($2) is "from the start".
// Every delete is guarded by the condition that made its rows due, so a
// row retried or deleted by another process meanwhile is left alone; two
// processes deleting the same rows wait for each other's row locks and the
// second deletes nothing.
const (
	sqlJobListExpired = `SELECT id, finished_at, upload_id FROM jobs
WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < $1 AND NOT creating
	AND ($2::timestamptz IS NULL OR (finished_at, id) > ($2, $3))
ORDER BY finished_at, id LIMIT $4`

	sqlJobDelete = `WITH d AS (
	DELETE FROM jobs WHERE id = ANY($1) AND status IN ('completed', 'failed', 'cancelled') AND finished_at < $2 AND NOT creating
	RETURNING id, finished_at, upload_id
), p AS (
	INSERT INTO purges (id, kind, created_at) SELECT id, 'job', $3 FROM d ON CONFLICT DO NOTHING
)
SELECT id, finished_at, upload_id FROM d ORDER BY finished_at, id`

	// treeDone holds when no task of tree %s here is unfinished or
	// finished at or after $1.
	treeDone = `NOT EXISTS (SELECT 1 FROM tasks u WHERE u.job_id = %s AND u.kind = 'tree'
	AND (u.state NOT IN ('completed', 'failed', 'cancelled') OR u.finished_at IS NULL OR u.finished_at >= $1))`

	sqlPurgeList   = `SELECT id, kind, created_at FROM purges ORDER BY created_at, id LIMIT $1`
	sqlPurgeDelete = `DELETE FROM purges WHERE id = $1`

	sqlTaskListIDs   = `SELECT id FROM tasks WHERE job_id = $1 LIMIT $2`
	sqlTaskLogDelete = `DELETE FROM task_logs WHERE id IN (
	SELECT id FROM task_logs WHERE task_id = ANY($1) LIMIT $2)`
	sqlTaskDelete = `WITH a AS (DELETE FROM task_args WHERE task_id = ANY($1) RETURNING 1),
t AS (DELETE FROM tasks WHERE id = ANY($1) RETURNING 1)
SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM a)`

	// uploadUnused holds when upload u is older than $1, by creation and by
	// last use, and no job but a completed one names it.
	uploadUnused = `u.created_at < $1 AND (u.used_at IS NULL OR u.used_at < $1)
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.upload_id = u.id AND j.status <> 'completed')`

	sqlUploadListExpired = `SELECT ` + uploadColumns + ` FROM uploads u
WHERE ` + uploadUnused + ` AND ($2::timestamptz IS NULL OR (u.created_at, u.id) > ($2, $3))
ORDER BY u.created_at, u.id LIMIT $4`
	sqlUploadDelete   = `DELETE FROM uploads u WHERE u.id = $2 AND ` + uploadUnused
	sqlUploadTouch    = `UPDATE uploads SET used_at = $2 WHERE id = $1`
	sqlUploadBlobKeys = `SELECT DISTINCT blob_key FROM uploads WHERE blob_key = ANY($1)`
)

var (
	sqlTaskTreeListExpired = `SELECT t.job_id, t.finished_at, t.id FROM tasks t
WHERE t.kind = 'tree' AND t.state IN ('completed', 'failed', 'cancelled') AND t.finished_at < $1
	AND ($2::timestamptz IS NULL OR (t.finished_at, t.id) > ($2, $3)) AND ` + fmt.Sprintf(treeDone, "t.job_id") + `
ORDER BY t.finished_at, t.id LIMIT $4`
	sqlTaskTreeDelete = `INSERT INTO purges (id, kind, created_at)
SELECT x, 'tree', $3 FROM unnest($2::text[]) AS x
WHERE EXISTS (SELECT 1 FROM tasks WHERE job_id = x AND kind = 'tree') AND ` + fmt.Sprintf(treeDone, "x") + `
ON CONFLICT DO NOTHING RETURNING id`
)

// cursorArgs are the $2 and $3 of a listing after c (NULL: from the start).
func cursorArgs(c *store.ExpiredCursor) (any, string) {
	if c == nil {
		return nil, ""
	}
	return c.At, c.ID
}

// JobListExpired returns final jobs finished before p.Before.
func (q *querier) JobListExpired(ctx context.Context, p *store.JobListExpiredParams) ([]store.ExpiredJob, error) {
	at, id := cursorArgs(p.After)
	rows, err := q.db.Query(ctx, sqlJobListExpired, p.Before, at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired jobs")
	}
	out, err := collectExpiredJobs(rows)
	if err != nil {
		return nil, translate(err, "list expired jobs")
	}
	return out, nil
}

func collectExpiredJobs(rows pgx.Rows) ([]store.ExpiredJob, error) {
	var (
		out []store.ExpiredJob
		j   store.ExpiredJob
		fin pgtype.Timestamptz
	)
	_, err := pgx.ForEachRow(rows, []any{&j.ID, &fin, &j.UploadID}, func() error {
		j.FinishedAt = timeOf(fin)
		out = append(out, j)
		return nil
	})
	return out, err
}

// JobDelete deletes the jobs of p.IDs still expired and records their
// purges, in one statement.
func (q *querier) JobDelete(ctx context.Context, p *store.JobDeleteParams) ([]store.ExpiredJob, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlJobDelete, p.IDs, p.Before, p.Now)
	if err != nil {
		return nil, translate(err, "delete %d jobs", len(p.IDs))
	}
	out, err := collectExpiredJobs(rows)
	if err != nil {
		return nil, translate(err, "delete %d jobs", len(p.IDs))
	}
	return out, nil
}

// TaskTreeListExpired walks the tasks of trees finished before p.Before.
func (q *querier) TaskTreeListExpired(ctx context.Context, p *store.TaskTreeListExpiredParams) ([]store.ExpiredTree, error) {
	at, id := cursorArgs(p.After)
	rows, err := q.db.Query(ctx, sqlTaskTreeListExpired, p.Before, at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list finished trees")
	}
	var (
		out []store.ExpiredTree
		t   store.ExpiredTree
		fin pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&t.ID, &fin, &t.After.ID}, func() error {
		t.After.At = timeOf(fin)
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, translate(err, "list finished trees")
	}
	return out, nil
}

// TaskTreeDelete records the purges of the trees of p.IDs still finished.
func (q *querier) TaskTreeDelete(ctx context.Context, p *store.TaskTreeDeleteParams) ([]string, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlTaskTreeDelete, p.Before, p.IDs, p.Now)
	if err != nil {
		return nil, translate(err, "record the purge of %d trees", len(p.IDs))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "record the purge of %d trees", len(p.IDs))
	}
	return out, nil
}

// PurgeList returns the purges under way, oldest first.
func (q *querier) PurgeList(ctx context.Context, limit int) ([]store.Purge, error) {
	rows, err := q.db.Query(ctx, sqlPurgeList, limitArg(limit))
	if err != nil {
		return nil, translate(err, "list purges")
	}
	var (
		out     []store.Purge
		p       store.Purge
		created pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&p.ID, &p.Kind, &created}, func() error {
		p.CreatedAt = timeOf(created)
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, translate(err, "list purges")
	}
	return out, nil
}

// PurgeDelete ends the purge of id.
func (q *querier) PurgeDelete(ctx context.Context, id string) error {
	if _, err := q.db.Exec(ctx, sqlPurgeDelete, id); err != nil {
		return translate(err, "end the purge of %s", id)
	}
	return nil
}

// TaskListIDs returns a page of the IDs of a job's or tree's tasks.
func (q *querier) TaskListIDs(ctx context.Context, p *store.TaskListIDsParams) ([]string, error) {
	rows, err := q.db.Query(ctx, sqlTaskListIDs, p.JobID, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list the tasks of %s", p.JobID)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "list the tasks of %s", p.JobID)
	}
	return out, nil
}

// TaskLogDelete deletes up to p.Limit log lines of p.TaskIDs.
func (q *querier) TaskLogDelete(ctx context.Context, p *store.TaskLogDeleteParams) (int, error) {
	if len(p.TaskIDs) == 0 {
		return 0, nil
	}
	tag, err := q.db.Exec(ctx, sqlTaskLogDelete, p.TaskIDs, limitArg(p.Limit))
	if err != nil {
		return 0, translate(err, "delete the logs of %d tasks", len(p.TaskIDs))
	}
	return int(tag.RowsAffected()), nil
}

// TaskDelete deletes the tasks p.IDs and their arguments, in one statement.
func (q *querier) TaskDelete(ctx context.Context, p *store.TaskDeleteParams) (store.TaskDeleted, error) {
	var d store.TaskDeleted
	if len(p.IDs) == 0 {
		return d, nil
	}
	if err := q.db.QueryRow(ctx, sqlTaskDelete, p.IDs).Scan(&d.Tasks, &d.Args); err != nil {
		return store.TaskDeleted{}, translate(err, "delete %d tasks", len(p.IDs))
	}
	return d, nil
}

// UploadListExpired returns the uploads nothing needs since p.Before.
func (q *querier) UploadListExpired(ctx context.Context, p *store.UploadListExpiredParams) ([]*domain.Upload, error) {
	at, id := cursorArgs(p.After)
	rows, err := q.db.Query(ctx, sqlUploadListExpired, p.Before, at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired uploads")
	}
	var (
		out     []*domain.Upload
		u       domain.Upload
		created pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&u.ID, &u.SHA256, &u.Bytes, &u.Rows, &u.BlobKey, &u.BlobBytes, &created, &u.Owner}, func() error {
		c := u
		c.CreatedAt = timeOf(created)
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, translate(err, "list expired uploads")
	}
	return out, nil
}

// UploadDelete deletes the upload p.ID if it is still expired.
func (q *querier) UploadDelete(ctx context.Context, p *store.UploadDeleteParams) (bool, error) {
	tag, err := q.db.Exec(ctx, sqlUploadDelete, p.Before, p.ID)
	if err != nil {
		return false, translate(err, "delete upload %s", p.ID)
	}
	return tag.RowsAffected() > 0, nil
}

// UploadTouch records that a job is created over upload p.ID at p.Now.
// The row lock it takes makes a concurrent UploadDelete wait, then find
// the upload used.
func (q *querier) UploadTouch(ctx context.Context, p *store.UploadTouchParams) error {
	tag, err := q.db.Exec(ctx, sqlUploadTouch, p.ID, p.Now)
	if err != nil {
		return translate(err, "touch upload %s", p.ID)
	}
	if tag.RowsAffected() == 0 {
		return translate(store.ErrNotFound, "touch upload %s", p.ID)
	}
	return nil
}

// UploadListBlobKeys returns which of keys some upload names.
func (q *querier) UploadListBlobKeys(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, sqlUploadBlobKeys, keys)
	if err != nil {
		return nil, translate(err, "look up %d blob names", len(keys))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "look up %d blob names", len(keys))
	}
	return out, nil
}
