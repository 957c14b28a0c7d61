package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

const (
	uploadColumns   = `id, sha256, bytes, rows, blob_key, blob_bytes, created_at, owner`
	sqlUploadInsert = `INSERT INTO uploads (` + uploadColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING`

	sqlUploadGet = `SELECT ` + uploadColumns + ` FROM uploads WHERE id = $1`

	// logLockClass is the first key of the advisory lock that makes appends
	// to one task's log take turns; the second is a hash of the task ID.
	logLockClass = 0x6c6f67 // "log" in ASCII

	sqlTaskLogLock = `SELECT pg_advisory_xact_lock($1::integer, hashtext($2))`

	// Appends the lines that fit under the cap, in order, so their IDs
	// increase with their position. The count stops at the cap.
	// A line's seq is $6 + its place in the batch, NULL when $6 is.
	sqlTaskLogAppend = `INSERT INTO task_logs (task_id, attempt, created_at, line, seq)
SELECT $1, $2, $3, l.line, $6::bigint + l.n - 1
FROM unnest($4::bytea[]) WITH ORDINALITY AS l (line, n)
WHERE l.n <= $5::bigint - (SELECT count(*) FROM (SELECT 1 FROM task_logs WHERE task_id = $1 LIMIT $5) AS kept)
ORDER BY l.n`

	sqlTaskLogLast = `SELECT coalesce(max(seq), -1) FROM task_logs WHERE task_id = $1 AND attempt = $2 AND seq IS NOT NULL`

	sqlTaskLogList = `SELECT id, attempt, created_at, line FROM task_logs
WHERE task_id = $1 AND id > $2
ORDER BY id
LIMIT $3`
)

// UploadInsert records u. A taken ID is store.ErrDuplicate, and leaves a
// transaction usable.
func (q *querier) UploadInsert(ctx context.Context, u *domain.Upload) error {
	normTime(&u.CreatedAt)
	tag, err := q.db.Exec(ctx, sqlUploadInsert, u.ID, u.SHA256, u.Bytes, u.Rows, u.BlobKey, u.BlobBytes, timeArg(u.CreatedAt), u.Owner)
	if err != nil {
		return translate(err, "insert upload %s", u.ID)
	}
	if tag.RowsAffected() == 0 {
		return translate(store.ErrDuplicate, "insert upload %s: its ID is taken", u.ID)
	}
	return nil
}

// UploadGet returns the upload with id, or store.ErrNotFound.
func (q *querier) UploadGet(ctx context.Context, id string) (*domain.Upload, error) {
	var u domain.Upload
	var created pgtype.Timestamptz
	err := q.db.QueryRow(ctx, sqlUploadGet, id).Scan(&u.ID, &u.SHA256, &u.Bytes, &u.Rows, &u.BlobKey, &u.BlobBytes, &created, &u.Owner)
	if err != nil {
		return nil, translate(err, "get upload %s", id)
	}
	u.CreatedAt = timeOf(created)
	return &u, nil
}

// TaskLogAppend appends p.Lines to the task's log, dropping those past
// p.MaxLines lines and, with p.Offset, those at positions of the attempt
// already stored. Appends to one task take turns (an advisory lock held
// to the end of the transaction), so the cap holds and a line's ID is
// greater than that of every line of the task committed before it: a
// reader that pages by ID misses none.
func (q *querier) TaskLogAppend(ctx context.Context, p *store.TaskLogAppendParams) error {
	if len(p.Lines) == 0 || p.MaxLines <= 0 {
		return nil
	}
	err := q.atomically(ctx, func(db dbtx) error {
		if _, err := db.Exec(ctx, sqlTaskLogLock, logLockClass, p.TaskID); err != nil {
			return err
		}
		todo := p.Lines
		var first any // NULL: not numbered
		if p.Offset != nil {
			// Under the task's lock: no other append of it runs meanwhile.
			var last int64
			if err := db.QueryRow(ctx, sqlTaskLogLast, p.TaskID, p.Attempt).Scan(&last); err != nil {
				return err
			}
			skip := min(max(last+1-*p.Offset, 0), int64(len(todo)))
			todo, first = todo[skip:], *p.Offset+skip
		}
		if len(todo) == 0 {
			return nil
		}
		lines := make([][]byte, len(todo))
		for i, l := range todo {
			lines[i] = []byte(l)
		}
		_, err := db.Exec(ctx, sqlTaskLogAppend, p.TaskID, p.Attempt, timeArg(p.Now), lines, p.MaxLines, first)
		return err
	})
	if err != nil {
		return translate(err, "append %d lines to the log of task %s", len(p.Lines), p.TaskID)
	}
	return nil
}

// TaskLogList returns up to p.Limit lines of the task's log with ID greater
// than p.After, by ID ascending. A Limit of 0 or less is no limit.
func (q *querier) TaskLogList(ctx context.Context, p *store.TaskLogListParams) ([]domain.LogLine, error) {
	rows, err := q.db.Query(ctx, sqlTaskLogList, p.TaskID, p.After, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list the log of task %s", p.TaskID)
	}
	var (
		out     []domain.LogLine
		l       domain.LogLine
		created pgtype.Timestamptz
		line    []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&l.ID, &l.Attempt, &created, &line}, func() error {
		l.Time, l.Line = timeOf(created), string(line)
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, translate(err, "list the log of task %s", p.TaskID)
	}
	return out, nil
}
