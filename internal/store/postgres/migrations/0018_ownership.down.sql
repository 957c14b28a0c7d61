DROP INDEX jobs_owner_status_created;
DROP INDEX jobs_owner_created;
DROP INDEX jobs_idempotency_key;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
ALTER TABLE tasks DROP COLUMN owner;
ALTER TABLE uploads DROP COLUMN owner;
ALTER TABLE jobs DROP COLUMN owner;
