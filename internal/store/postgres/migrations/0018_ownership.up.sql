-- Ownership: jobs and uploads belong to the account that created them,
-- tasks to their job's or tree's; what exists already is admin's. A task
-- carries its owner as it carries its job's creation time, for claims. An
-- idempotency key is the caller's own: two accounts may use the same one.
ALTER TABLE jobs ADD COLUMN owner text NOT NULL DEFAULT 'admin';
ALTER TABLE uploads ADD COLUMN owner text NOT NULL DEFAULT 'admin';
ALTER TABLE tasks ADD COLUMN owner text NOT NULL DEFAULT 'admin';

DROP INDEX jobs_idempotency_key;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- An account's job list, with and without a status.
CREATE INDEX jobs_owner_created ON jobs (owner, created_at, id);
CREATE INDEX jobs_owner_status_created ON jobs (owner, status, created_at, id);
