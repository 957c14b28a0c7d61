-- Retention: final jobs, finished trees and unused uploads are deleted once
-- past their retention. Everything a pass looks for is found through an
-- index that holds only candidates, never by a scan of the whole table.

-- Jobs and trees whose tasks are being deleted, in batches, after the job
-- row (a tree has none) went: a crash between two batches leaves the purge
-- here for the next pass to finish.
CREATE TABLE purges (
    id         TEXT    NOT NULL PRIMARY KEY,
    kind       TEXT    NOT NULL, -- job or tree
    created_at INTEGER NOT NULL
) STRICT;

-- When a job was last created over an upload; NULL: never. Retention
-- counts an upload's age from the later of this and its creation.
ALTER TABLE uploads ADD COLUMN used_at INTEGER;

-- Final jobs by when they finished.
CREATE INDEX jobs_finished ON jobs (finished_at, id) WHERE status IN ('completed', 'failed', 'cancelled');
-- The jobs over an upload, to tell whether an unfinished one still needs it.
CREATE INDEX jobs_upload ON jobs (upload_id, status) WHERE upload_id <> '';
-- Final tree tasks by when they finished.
CREATE INDEX tasks_tree_finished ON tasks (finished_at, id) WHERE kind = 'tree' AND state IN ('completed', 'failed', 'cancelled');
-- Uploads by age, and by the file they name (the sweep of orphan files).
CREATE INDEX uploads_created ON uploads (created_at, id);
CREATE INDEX uploads_blob_key ON uploads (blob_key);
