-- Claims: one index for claims of any workload and one for claims of named
-- workloads, each in claim order behind the task's kind (and workload), so
-- that a claim of a rare workload reads its first entries whatever the
-- backlog of others. Both hold runnable tasks only: a task in backoff has a
-- run_after and sits in tasks_backoff instead, until a claim or the reaper
-- finds its time passed and clears it (a task runnable at once has none).
DROP INDEX tasks_claim;
UPDATE tasks SET run_after = NULL
    WHERE state = 'pending' AND run_after <= CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER);
CREATE INDEX tasks_claim ON tasks (kind, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
CREATE INDEX tasks_claim_workload ON tasks (kind, workload, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
CREATE INDEX tasks_backoff ON tasks (run_after) WHERE state = 'pending' AND run_after IS NOT NULL;

-- A job is created in batches: it is hidden from clients (creating) until
-- its last task is written. A creation that died leaves a creating job
-- whose updated_at stops moving; the reaper deletes it.
ALTER TABLE jobs ADD COLUMN creating INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_creating ON jobs (updated_at) WHERE creating;
