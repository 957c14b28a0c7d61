DROP INDEX tasks_claim_open;
UPDATE tasks SET state = 'pending', attempt = 0, lease_owner = '', lease_expires_at = NULL, leased_at = NULL,
    attempt_deadline = NULL, voters = '', version = version + 1
    WHERE kind = 'chunk' AND state = 'leased' AND lease_owner = '(quorum)';
CREATE INDEX tasks_claim_open ON tasks (priority DESC, job_created_at, job_id, chunk_index, voters)
    WHERE state = 'pending' AND workers <> '';
ALTER TABLE tasks DROP COLUMN ballots;
