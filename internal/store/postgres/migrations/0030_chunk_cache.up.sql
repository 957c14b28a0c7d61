-- The chunk cache: chunk outputs remembered for reuse, under the hash of
-- what an output depends on (store.CacheEntry), pointing at the chunk
-- task that holds the output, with how many rows it kept and for what
-- top_k. An entry goes when its task is deleted. Jobs say whether they
-- use the cache, and count the chunks it completed.
CREATE TABLE chunk_cache (
    key text PRIMARY KEY,
    task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    rows integer NOT NULL,
    top_k integer NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX chunk_cache_task ON chunk_cache (task_id);
ALTER TABLE jobs ADD COLUMN no_cache boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN cached integer NOT NULL DEFAULT 0;
