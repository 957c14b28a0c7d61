-- Who may run a job's chunks: '' (trusted workers), 'own' or 'any', and
-- for 'any' the quorum of accounts that must agree on an untrusted
-- worker's output. Tasks carry their job's mode, so that the claims of
-- untrusted workers read only what they may run, from an index of their
-- own.
ALTER TABLE jobs ADD COLUMN workers TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN quorum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN workers TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_claim_open ON tasks (priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND workers <> '';
