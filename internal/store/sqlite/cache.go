package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/scimesh/scimesh/internal/store"
)

var (
	// ?1 is a JSON array of [key, task_id, rows, top_k, created_at] rows.
	sqlCachePut = newStatement(`INSERT INTO chunk_cache (key, task_id, rows, top_k, created_at)
	SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?1) WHERE true
	ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id, rows = excluded.rows, top_k = excluded.top_k,
	created_at = excluded.created_at WHERE excluded.top_k > chunk_cache.top_k`)
	sqlCacheGet = newStatement(`SELECT key, task_id, rows, top_k, created_at FROM chunk_cache
	WHERE key IN (SELECT value FROM json_each(?1))`)
	sqlJobAddCached = newStatement(`UPDATE jobs SET cached = cached + ? WHERE id = ?`)
)

// CachePut remembers entries, in one statement.
func (q *querier) CachePut(ctx context.Context, entries []store.CacheEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([][5]any, len(entries))
	for i, e := range entries {
		rows[i] = [5]any{e.Key, e.TaskID, e.Rows, e.TopK, timeArg(e.CreatedAt)}
	}
	b, _ := json.Marshal(rows) // strings and integers always encode
	if _, err := q.exec(ctx, sqlCachePut, string(b)); err != nil {
		return translate(err, "remember %d chunk outputs", len(entries))
	}
	return nil
}

// CacheGet returns the entries remembered under keys.
func (q *querier) CacheGet(ctx context.Context, keys []string) (map[string]store.CacheEntry, error) {
	out := map[string]store.CacheEntry{}
	if len(keys) == 0 {
		return out, nil
	}
	err := q.query(ctx, false, func(r scanner) error {
		var e store.CacheEntry
		var created sql.NullInt64
		err := r.Scan(&e.Key, &e.TaskID, &e.Rows, &e.TopK, &created)
		e.CreatedAt = timeOf(created)
		out[e.Key] = e
		return err
	}, sqlCacheGet, jsonArray(keys))
	if err != nil {
		return nil, translate(err, "read %d chunk cache keys", len(keys))
	}
	return out, nil
}

// JobAddCached adds n to the chunks of job id the cache completed.
func (q *querier) JobAddCached(ctx context.Context, id string, n int) error {
	res, err := q.exec(ctx, sqlJobAddCached, n, id)
	if err == nil {
		var rows int64
		if rows, err = res.RowsAffected(); err == nil && rows == 0 {
			err = sql.ErrNoRows
		}
	}
	if err != nil {
		return translate(err, "count %d cached chunks of job %s", n, id)
	}
	return nil
}
