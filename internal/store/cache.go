package store

import (
	"context"
	"time"
)

// CacheQuerier reads and writes the chunk cache: chunk outputs remembered
// for reuse. An entry points at the chunk task that holds the output and
// goes when that task is deleted (by retention, with its job).
type CacheQuerier interface {
	// CachePut remembers entries. An entry whose key is remembered
	// replaces the one there only when it kept rows for a larger top_k.
	CachePut(ctx context.Context, entries []CacheEntry) error
	// CacheGet returns the entries remembered under keys, by key; a key
	// not remembered is not in the map.
	CacheGet(ctx context.Context, keys []string) (map[string]CacheEntry, error)
	// JobAddCached adds n to the count of job id's chunks completed from
	// the cache (domain.Job.Cached) without touching its version: no
	// other write of a job sets that count. An unknown job is ErrNotFound.
	JobAddCached(ctx context.Context, id string, n int) error
}

// CacheEntry is a remembered chunk output: that of chunk task TaskID,
// which kept Rows rows for a top_k of TopK (fewer when the chunk gave
// fewer), under Key, the hash of everything the output depends on.
type CacheEntry struct {
	Key       string
	TaskID    string
	Rows      int
	TopK      int
	CreatedAt time.Time
}
