ALTER TABLE jobs DROP COLUMN cached;
ALTER TABLE jobs DROP COLUMN no_cache;
DROP TRIGGER tasks_chunk_cache;
DROP TABLE chunk_cache;
