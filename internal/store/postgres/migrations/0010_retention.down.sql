DROP INDEX uploads_blob_key;
DROP INDEX uploads_created;
DROP INDEX tasks_tree_finished;
DROP INDEX jobs_upload;
DROP INDEX jobs_finished;
ALTER TABLE uploads DROP COLUMN used_at;
DROP TABLE purges;
