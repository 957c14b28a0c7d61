DROP INDEX jobs_creating;
ALTER TABLE jobs DROP COLUMN IF EXISTS creating;
DROP INDEX tasks_backoff;
DROP INDEX tasks_claim_workload;
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (priority DESC, job_created_at NULLS FIRST, job_id, chunk_index)
    WHERE state = 'pending';
