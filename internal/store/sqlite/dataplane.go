package sqlite

import (
	"context"
	"database/sql"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

const uploadColumns = `id, sha256, bytes, rows, blob_key, blob_bytes, created_at, owner`

var (
	sqlUploadInsert = newStatement(`INSERT INTO uploads (` + uploadColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)

	sqlUploadGet = newStatement(`SELECT ` + uploadColumns + ` FROM uploads WHERE id = ?`)

	// sqlTaskLogCount counts a task's lines up to a bound, so that the
	// count costs at most that many index steps.
	sqlTaskLogCount = newStatement(`SELECT count(*) FROM (SELECT 1 FROM task_logs WHERE task_id = ? LIMIT ?)`)

	sqlTaskLogInsert = newStatement(`INSERT INTO task_logs (task_id, attempt, created_at, line, seq) VALUES (?, ?, ?, ?, ?)`)

	sqlTaskLogLast = newStatement(`SELECT coalesce(max(seq), -1) FROM task_logs WHERE task_id = ? AND attempt = ? AND seq IS NOT NULL`)

	sqlTaskLogList = newStatement(`SELECT id, attempt, created_at, line FROM task_logs WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?`)
)

// UploadInsert records u. A taken ID is store.ErrDuplicate.
func (q *querier) UploadInsert(ctx context.Context, u *domain.Upload) error {
	_, err := q.exec(ctx, sqlUploadInsert, u.ID, u.SHA256, u.Bytes, u.Rows, u.BlobKey, u.BlobBytes, timeArg(u.CreatedAt), u.Owner)
	if err != nil {
		return translate(err, "insert upload %s", u.ID)
	}
	return nil
}

// UploadGet returns the upload with id, or store.ErrNotFound.
func (q *querier) UploadGet(ctx context.Context, id string) (*domain.Upload, error) {
	var (
		u       domain.Upload
		created sql.NullInt64
	)
	err := q.queryRow(ctx, false, func(r scanner) error {
		return r.Scan(&u.ID, &u.SHA256, &u.Bytes, &u.Rows, &u.BlobKey, &u.BlobBytes, &created, &u.Owner)
	}, sqlUploadGet, id)
	if err != nil {
		return nil, translate(err, "get upload %s", id)
	}
	u.CreatedAt = timeOf(created)
	return &u, nil
}

// TaskLogAppend appends p.Lines to the task's log, dropping those past
// p.MaxLines lines in all and, with p.Offset, those at positions of the
// attempt already stored.
func (q *querier) TaskLogAppend(ctx context.Context, p *store.TaskLogAppendParams) error {
	if len(p.Lines) == 0 || p.MaxLines <= 0 {
		return nil
	}
	err := q.atomically(ctx, "task_log_append", func(q *querier) error {
		lines, first := p.Lines, int64(0)
		if p.Offset != nil {
			var last int64
			err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&last) }, sqlTaskLogLast, p.TaskID, p.Attempt)
			if err != nil {
				return err
			}
			skip := min(max(last+1-*p.Offset, 0), int64(len(lines)))
			lines, first = lines[skip:], *p.Offset+skip
		}
		if len(lines) == 0 {
			return nil
		}
		var n int
		err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&n) }, sqlTaskLogCount, p.TaskID, p.MaxLines)
		if err != nil {
			return err
		}
		for i, line := range lines[:min(len(lines), max(p.MaxLines-n, 0))] {
			var seq any // NULL: not numbered
			if p.Offset != nil {
				seq = first + int64(i)
			}
			if _, err := q.exec(ctx, sqlTaskLogInsert, p.TaskID, p.Attempt, timeArg(p.Now), line, seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return translate(err, "append %d lines to the log of task %s", len(p.Lines), p.TaskID)
	}
	return nil
}

// TaskLogList returns a page of the task's log.
func (q *querier) TaskLogList(ctx context.Context, p *store.TaskLogListParams) ([]domain.LogLine, error) {
	var out []domain.LogLine
	err := q.query(ctx, false, func(r scanner) error {
		var (
			l       domain.LogLine
			created sql.NullInt64
		)
		if err := r.Scan(&l.ID, &l.Attempt, &created, &l.Line); err != nil {
			return err
		}
		l.Time = timeOf(created)
		out = append(out, l)
		return nil
	}, sqlTaskLogList, p.TaskID, p.After, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list the log of task %s", p.TaskID)
	}
	return out, nil
}
