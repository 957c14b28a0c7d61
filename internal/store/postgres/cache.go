package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/store"
)

const (
	sqlCachePut = `INSERT INTO chunk_cache (key, task_id, rows, top_k, created_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[])
ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id, rows = excluded.rows, top_k = excluded.top_k,
	created_at = excluded.created_at WHERE excluded.top_k > chunk_cache.top_k`
	sqlCacheGet     = `SELECT key, task_id, rows, top_k, created_at FROM chunk_cache WHERE key = ANY($1)`
	sqlJobAddCached = `UPDATE jobs SET cached = cached + $1 WHERE id = $2`
)

// CachePut remembers entries, in one statement.
func (q *querier) CachePut(ctx context.Context, entries []store.CacheEntry) error {
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	keys, tasks, rows, topKs, created := make([]string, n), make([]string, n), make([]int32, n), make([]int32, n), make([]any, n)
	for i, e := range entries {
		keys[i], tasks[i], rows[i], topKs[i], created[i] = e.Key, e.TaskID, int32(e.Rows), int32(e.TopK), timeArg(e.CreatedAt)
	}
	if _, err := q.db.Exec(ctx, sqlCachePut, keys, tasks, rows, topKs, created); err != nil {
		return translate(err, "remember %d chunk outputs", n)
	}
	return nil
}

// CacheGet returns the entries remembered under keys.
func (q *querier) CacheGet(ctx context.Context, keys []string) (map[string]store.CacheEntry, error) {
	out := map[string]store.CacheEntry{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := q.db.Query(ctx, sqlCacheGet, keys)
	if err != nil {
		return nil, translate(err, "read %d chunk cache keys", len(keys))
	}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var e store.CacheEntry
		var created pgtype.Timestamptz
		err := r.Scan(&e.Key, &e.TaskID, &e.Rows, &e.TopK, &created)
		e.CreatedAt = timeOf(created)
		out[e.Key] = e
		return struct{}{}, err
	})
	if err != nil {
		return nil, translate(err, "read %d chunk cache keys", len(keys))
	}
	return out, nil
}

// JobAddCached adds n to the chunks of job id the cache completed.
func (q *querier) JobAddCached(ctx context.Context, id string, n int) error {
	tag, err := q.db.Exec(ctx, sqlJobAddCached, n, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return translate(err, "count %d cached chunks of job %s", n, id)
	}
	return nil
}
