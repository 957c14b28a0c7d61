DROP INDEX jobs_creating;
ALTER TABLE jobs DROP COLUMN creating;
DROP INDEX tasks_backoff;
DROP INDEX tasks_claim_workload;
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (priority DESC, job_created_at, job_id, chunk_index, run_after, kind, workload)
    WHERE state = 'pending';
