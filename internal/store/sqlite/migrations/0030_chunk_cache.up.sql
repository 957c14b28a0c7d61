-- The chunk cache: chunk outputs remembered for reuse, under the hash of
-- what an output depends on (store.CacheEntry), pointing at the chunk
-- task that holds the output, with how many rows it kept and for what
-- top_k. An entry goes when its task is deleted. Jobs say whether they
-- use the cache, and count the chunks it completed.
CREATE TABLE chunk_cache (
    key TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    rows INTEGER NOT NULL,
    top_k INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX chunk_cache_task ON chunk_cache (task_id);
CREATE TRIGGER tasks_chunk_cache AFTER DELETE ON tasks BEGIN
    DELETE FROM chunk_cache WHERE task_id = OLD.id;
END;
ALTER TABLE jobs ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
