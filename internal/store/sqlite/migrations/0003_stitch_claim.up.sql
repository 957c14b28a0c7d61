-- Coordinators lease stitch tasks with claims of their own, which must not
-- walk past the whole backlog of pending chunk tasks to find none.
CREATE INDEX tasks_claim_stitch ON tasks (priority DESC, job_created_at, job_id, chunk_index, run_after, workload)
    WHERE state = 'pending' AND kind = 'stitch';
