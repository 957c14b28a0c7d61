-- The chart of a job counts its completed chunks by finish time: with
-- finished_at in the index it can read the index alone. The index entry of
-- a task is rewritten when it completes anyway (its state changes).
DROP INDEX tasks_job_kind_state;
CREATE INDEX tasks_job_kind_state ON tasks (job_id, kind, state, finished_at);
