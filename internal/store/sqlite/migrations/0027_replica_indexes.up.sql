-- Replicas are claimed from tasks_claim_open alone: the trusted claims'
-- indexes leave them out, so that a replica's insert and lease touch four
-- indexes fewer. Queries of those indexes say kind <> 'replica' literally,
-- for SQLite to use a partial index.
DROP INDEX tasks_claim;
DROP INDEX tasks_claim_workload;
DROP INDEX tasks_fair;
DROP INDEX tasks_fair_workload;
CREATE INDEX tasks_claim ON tasks (kind, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica';
CREATE INDEX tasks_claim_workload ON tasks (kind, workload, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica';
CREATE INDEX tasks_fair ON tasks (kind, owner, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica';
CREATE INDEX tasks_fair_workload ON tasks (kind, workload, owner, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica';
