DROP INDEX tasks_claim;
DROP INDEX tasks_claim_workload;
DROP INDEX tasks_fair;
DROP INDEX tasks_fair_workload;
CREATE INDEX tasks_claim ON tasks (kind, priority DESC, job_created_at NULLS FIRST, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> '';
CREATE INDEX tasks_claim_workload ON tasks (kind, workload, priority DESC, job_created_at NULLS FIRST, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
CREATE INDEX tasks_fair ON tasks (kind, owner, (-priority), (COALESCE(job_created_at, '-infinity')), job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> '';
CREATE INDEX tasks_fair_workload ON tasks (kind, workload, owner, (-priority), (COALESCE(job_created_at, '-infinity')), job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
