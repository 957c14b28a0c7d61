package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The statements of retention. ID lists are JSON arrays (json_each), so
// one prepared statement serves any number of IDs. A NULL cursor (?2) is
// "from the start".
const (
	finalJob  = `('completed', 'failed', 'cancelled')`
	finalTask = `('completed', 'failed', 'cancelled')`

	// treeDone holds when no task of tree ?1 here is unfinished or
	// finished at or after ?2.
	treeDone = `NOT EXISTS (SELECT 1 FROM tasks u WHERE u.job_id = %s AND u.kind = 'tree'
	AND (u.state NOT IN ` + finalTask + ` OR u.finished_at IS NULL OR u.finished_at >= ?1))`

	// uploadUnused holds when upload u is older than ?1, by creation and
	// by last use, and no job but a completed one names it.
	uploadUnused = `u.created_at < ?1 AND (u.used_at IS NULL OR u.used_at < ?1)
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.upload_id = u.id AND j.status <> 'completed')`
)

var (
	sqlJobListExpired = newStatement(`SELECT id, finished_at, upload_id FROM jobs
	WHERE status IN ` + finalJob + ` AND finished_at < ?1 AND NOT creating AND (?2 IS NULL OR (finished_at, id) > (?2, ?3))
	ORDER BY finished_at, id LIMIT ?4`)

	sqlJobDelete = newStatement(`DELETE FROM jobs WHERE id = ?1 AND status IN ` + finalJob + ` AND finished_at < ?2 AND NOT creating
	RETURNING id, finished_at, upload_id`)

	sqlPurgeInsert = newStatement(`INSERT INTO purges (id, kind, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)

	sqlPurgeList = newStatement(`SELECT id, kind, created_at FROM purges ORDER BY created_at, id LIMIT ?`)

	sqlPurgeDelete = newStatement(`DELETE FROM purges WHERE id = ?`)

	sqlTaskListIDs = newStatement(`SELECT id FROM tasks WHERE job_id = ? LIMIT ?`)

	sqlTaskLogDelete = newStatement(`DELETE FROM task_logs WHERE id IN (
	SELECT id FROM task_logs WHERE task_id IN (SELECT value FROM json_each(?1)) LIMIT ?2)`)

	sqlTaskArgDelete = newStatement(`DELETE FROM task_args WHERE task_id IN (SELECT value FROM json_each(?))`)

	sqlTaskDelete = newStatement(`DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(?))`)

	sqlUploadListExpired = newStatement(`SELECT ` + uploadColumns + ` FROM uploads u WHERE ` + uploadUnused + `
	AND (?2 IS NULL OR (u.created_at, u.id) > (?2, ?3)) ORDER BY u.created_at, u.id LIMIT ?4`)

	sqlUploadDelete = newStatement(`DELETE FROM uploads AS u WHERE u.id = ?2 AND ` + uploadUnused)

	sqlUploadTouch = newStatement(`UPDATE uploads SET used_at = ? WHERE id = ?`)

	sqlUploadBlobKeys = newStatement(`SELECT DISTINCT blob_key FROM uploads WHERE blob_key IN (SELECT value FROM json_each(?))`)

	sqlTaskTreeListExpired = newStatement(`SELECT t.job_id, t.finished_at, t.id FROM tasks t
	WHERE t.kind = 'tree' AND t.state IN ` + finalTask + ` AND t.finished_at < ?1
	AND (?2 IS NULL OR (t.finished_at, t.id) > (?2, ?3)) AND ` + fmt.Sprintf(treeDone, "t.job_id") + `
	ORDER BY t.finished_at, t.id LIMIT ?4`)

	sqlTaskTreeDelete = newStatement(`INSERT INTO purges (id, kind, created_at) SELECT ?2, 'tree', ?3
	WHERE EXISTS (SELECT 1 FROM tasks WHERE job_id = ?2 AND kind = 'tree') AND ` + fmt.Sprintf(treeDone, "?2") + `
	ON CONFLICT DO NOTHING RETURNING id`)
)

// cursorArgs are the ?2 and ?3 of a listing after c (NULL: from the start).
func cursorArgs(c *store.ExpiredCursor) (any, string) {
	if c == nil {
		return nil, ""
	}
	return c.At.UnixMicro(), c.ID
}

// JobListExpired returns final jobs finished before p.Before.
func (q *querier) JobListExpired(ctx context.Context, p *store.JobListExpiredParams) ([]store.ExpiredJob, error) {
	at, id := cursorArgs(p.After)
	var out []store.ExpiredJob
	err := q.query(ctx, false, func(r scanner) error {
		var j store.ExpiredJob
		var fin sql.NullInt64
		if err := r.Scan(&j.ID, &fin, &j.UploadID); err != nil {
			return err
		}
		j.FinishedAt = timeOf(fin)
		out = append(out, j)
		return nil
	}, sqlJobListExpired, p.Before.UnixMicro(), at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired jobs")
	}
	return out, nil
}

// JobDelete deletes the jobs of p.IDs still expired and records their purges.
func (q *querier) JobDelete(ctx context.Context, p *store.JobDeleteParams) ([]store.ExpiredJob, error) {
	var out []store.ExpiredJob
	err := q.atomically(ctx, "job_delete", func(q *querier) error {
		out = out[:0]
		for _, id := range p.IDs {
			var j store.ExpiredJob
			var fin sql.NullInt64
			err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&j.ID, &fin, &j.UploadID) },
				sqlJobDelete, id, p.Before.UnixMicro())
			if errors.Is(err, sql.ErrNoRows) {
				continue // retried, not expired, or deleted by another process
			}
			if err != nil {
				return fmt.Errorf("job %s: %w", id, err)
			}
			if _, err := q.exec(ctx, sqlPurgeInsert, id, "job", p.Now.UnixMicro()); err != nil {
				return fmt.Errorf("record the purge of job %s: %w", id, err)
			}
			j.FinishedAt = timeOf(fin)
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "delete %d jobs", len(p.IDs))
	}
	return out, nil
}

// TaskTreeListExpired walks the tasks of trees finished before p.Before.
func (q *querier) TaskTreeListExpired(ctx context.Context, p *store.TaskTreeListExpiredParams) ([]store.ExpiredTree, error) {
	at, id := cursorArgs(p.After)
	var out []store.ExpiredTree
	err := q.query(ctx, false, func(r scanner) error {
		var t store.ExpiredTree
		var fin sql.NullInt64
		if err := r.Scan(&t.ID, &fin, &t.After.ID); err != nil {
			return err
		}
		t.After.At = timeOf(fin)
		out = append(out, t)
		return nil
	}, sqlTaskTreeListExpired, p.Before.UnixMicro(), at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list finished trees")
	}
	return out, nil
}

// TaskTreeDelete records the purges of the trees of p.IDs still finished.
func (q *querier) TaskTreeDelete(ctx context.Context, p *store.TaskTreeDeleteParams) ([]string, error) {
	var out []string
	err := q.atomically(ctx, "tree_delete", func(q *querier) error {
		out = out[:0]
		for _, id := range p.IDs {
			var got string
			err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&got) },
				sqlTaskTreeDelete, p.Before.UnixMicro(), id, p.Now.UnixMicro())
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("tree %s: %w", id, err)
			}
			out = append(out, got)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "record the purge of %d trees", len(p.IDs))
	}
	return out, nil
}

// PurgeList returns the purges under way, oldest first.
func (q *querier) PurgeList(ctx context.Context, limit int) ([]store.Purge, error) {
	var out []store.Purge
	err := q.query(ctx, false, func(r scanner) error {
		var p store.Purge
		var created sql.NullInt64
		if err := r.Scan(&p.ID, &p.Kind, &created); err != nil {
			return err
		}
		p.CreatedAt = timeOf(created)
		out = append(out, p)
		return nil
	}, sqlPurgeList, limitArg(limit))
	if err != nil {
		return nil, translate(err, "list purges")
	}
	return out, nil
}

// PurgeDelete ends the purge of id.
func (q *querier) PurgeDelete(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, sqlPurgeDelete, id); err != nil {
		return translate(err, "end the purge of %s", id)
	}
	return nil
}

// TaskListIDs returns a page of the IDs of a job's or tree's tasks.
func (q *querier) TaskListIDs(ctx context.Context, p *store.TaskListIDsParams) ([]string, error) {
	out, err := q.strings(ctx, sqlTaskListIDs, p.JobID, limitArg(p.Limit))
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
	res, err := q.exec(ctx, sqlTaskLogDelete, jsonArray(p.TaskIDs), limitArg(p.Limit))
	if err != nil {
		return 0, translate(err, "delete the logs of %d tasks", len(p.TaskIDs))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "delete the logs of %d tasks", len(p.TaskIDs))
	}
	return int(n), nil
}

// TaskDelete deletes the tasks p.IDs and their arguments.
func (q *querier) TaskDelete(ctx context.Context, p *store.TaskDeleteParams) (store.TaskDeleted, error) {
	var d store.TaskDeleted
	if len(p.IDs) == 0 {
		return d, nil
	}
	err := q.atomically(ctx, "task_delete", func(q *querier) error {
		ids := jsonArray(p.IDs)
		res, err := q.exec(ctx, sqlTaskArgDelete, ids)
		if err != nil {
			return fmt.Errorf("their arguments: %w", err)
		}
		n, _ := res.RowsAffected()
		d.Args = int(n)
		if res, err = q.exec(ctx, sqlTaskDelete, ids); err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		d.Tasks = int(n)
		return nil
	})
	if err != nil {
		return store.TaskDeleted{}, translate(err, "delete %d tasks", len(p.IDs))
	}
	return d, nil
}

// UploadListExpired returns the uploads nothing needs since p.Before.
func (q *querier) UploadListExpired(ctx context.Context, p *store.UploadListExpiredParams) ([]*domain.Upload, error) {
	at, id := cursorArgs(p.After)
	var out []*domain.Upload
	err := q.query(ctx, false, func(r scanner) error {
		var u domain.Upload
		var created sql.NullInt64
		if err := r.Scan(&u.ID, &u.SHA256, &u.Bytes, &u.Rows, &u.BlobKey, &u.BlobBytes, &created, &u.Owner); err != nil {
			return err
		}
		u.CreatedAt = timeOf(created)
		out = append(out, &u)
		return nil
	}, sqlUploadListExpired, p.Before.UnixMicro(), at, id, limitArg(p.Limit))
	if err != nil {
		return nil, translate(err, "list expired uploads")
	}
	return out, nil
}

// UploadDelete deletes the upload p.ID if it is still expired.
func (q *querier) UploadDelete(ctx context.Context, p *store.UploadDeleteParams) (bool, error) {
	res, err := q.exec(ctx, sqlUploadDelete, p.Before.UnixMicro(), p.ID)
	if err != nil {
		return false, translate(err, "delete upload %s", p.ID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, translate(err, "delete upload %s", p.ID)
	}
	return n > 0, nil
}

// UploadTouch records that a job is created over upload p.ID at p.Now.
func (q *querier) UploadTouch(ctx context.Context, p *store.UploadTouchParams) error {
	res, err := q.exec(ctx, sqlUploadTouch, p.Now.UnixMicro(), p.ID)
	if err != nil {
		return translate(err, "touch upload %s", p.ID)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return translate(store.ErrNotFound, "touch upload %s", p.ID)
	}
	return nil
}

// UploadListBlobKeys returns which of keys some upload names.
func (q *querier) UploadListBlobKeys(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var out []string
	err := q.query(ctx, false, func(r scanner) error {
		var k string
		if err := r.Scan(&k); err != nil {
			return err
		}
		out = append(out, k)
		return nil
	}, sqlUploadBlobKeys, jsonArray(keys))
	if err != nil {
		return nil, translate(err, "look up %d blob names", len(keys))
	}
	return out, nil
}

// strings runs a statement that returns one string a row.
func (q *querier) strings(ctx context.Context, st *statement, args ...any) ([]string, error) {
	var out []string
	err := q.query(ctx, false, func(r scanner) error {
		var v string
		if err := r.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, st, args...)
	return out, err
}
