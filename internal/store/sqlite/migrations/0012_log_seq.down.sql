DROP INDEX IF EXISTS task_logs_seq;
ALTER TABLE task_logs DROP COLUMN seq;
