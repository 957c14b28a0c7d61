-- A chunk being voted on keeps its replicas as ballots in its own row: a
-- JSON array of what each replica holds of its own (domain.Ballot), NULL
-- for every other task.
ALTER TABLE tasks ADD COLUMN ballots TEXT;
-- Votes under way start over: their chunks go back to pending with a
-- fresh budget of attempts, and the rows of their replicas go. No
-- accepted result is in those rows.
UPDATE tasks SET state = 'pending', attempt = 0, lease_owner = '', lease_expires_at = NULL, leased_at = NULL,
    attempt_deadline = NULL, voters = '', version = version + 1
    WHERE kind = 'chunk' AND state = 'leased' AND lease_owner = '(quorum)';
DELETE FROM tasks WHERE kind = 'replica';
-- A chunk being voted on is leased, and open to untrusted workers while
-- one of its ballots is pending: its voters then say whom it is not for,
-- and are never empty.
DROP INDEX tasks_claim_open;
CREATE INDEX tasks_claim_open ON tasks (priority DESC, job_created_at, job_id, chunk_index, voters)
    WHERE (state = 'pending' OR (state = 'leased' AND voters <> '')) AND workers <> '';
