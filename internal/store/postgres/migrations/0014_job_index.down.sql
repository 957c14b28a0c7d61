CREATE INDEX tasks_job_kind_index ON tasks (job_id, kind, chunk_index);
CREATE INDEX tasks_job_kind_state ON tasks (job_id, kind, state, finished_at);
DROP INDEX tasks_job;
