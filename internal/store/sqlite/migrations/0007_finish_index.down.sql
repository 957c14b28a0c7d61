DROP INDEX tasks_job_kind_state;
CREATE INDEX tasks_job_kind_state ON tasks (job_id, kind, state, chunk_index);
