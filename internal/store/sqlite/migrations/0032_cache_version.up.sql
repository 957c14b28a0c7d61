-- The workload version under which a job's creation looked its chunks
-- up in the chunk cache ('' when no single version was announced):
-- claims by workers of that version need not look them up again.
ALTER TABLE jobs ADD COLUMN cache_version TEXT NOT NULL DEFAULT '';
