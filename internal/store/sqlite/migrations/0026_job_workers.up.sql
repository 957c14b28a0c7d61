-- Who may run a job's chunks: '' (trusted workers), 'own' or 'any', and
-- for 'any' the quorum of accounts that must agree on an untrusted
-- worker's output. Tasks carry their job's mode, so that the claims of
-- untrusted workers read only what they may run, from an index of their
-- own. A replica carries the accounts that ran or run another replica of
-- its chunk when it was made (",a,b,"), which that index holds, so that a
-- claim passes over the replicas its account may not take at the cost of
-- an index entry.
ALTER TABLE jobs ADD COLUMN workers TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN quorum INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN workers TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN voters TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_claim_open ON tasks (priority DESC, job_created_at, job_id, chunk_index, voters)
    WHERE state = 'pending' AND workers <> '';
