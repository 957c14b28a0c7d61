-- Accounting and the audit trail.
--
-- leased_at is when a task's last attempt was leased: the start of the
-- time charged to its owner when the attempt ends. Leases in flight get
-- their last write's time, the best known.
ALTER TABLE tasks ADD COLUMN leased_at INTEGER;
UPDATE tasks SET leased_at = updated_at WHERE state = 'leased';

-- usage sums the leased time of ended attempts per hour (by when each
-- ended), account, workload and worker account: a row per key, added to
-- in the transaction that ends the attempts, so that it stays small
-- whatever the number of attempts.
CREATE TABLE usage (
    hour           INTEGER NOT NULL,
    account        TEXT    NOT NULL,
    workload       TEXT    NOT NULL,
    worker_account TEXT    NOT NULL,
    tasks          INTEGER NOT NULL,
    worker_us      INTEGER NOT NULL,
    PRIMARY KEY (hour, account, workload, worker_account)
) STRICT, WITHOUT ROWID;

-- audit records who did what, when: account changes, tokens, jobs,
-- uploads, retention.
CREATE TABLE audit (
    id      INTEGER NOT NULL PRIMARY KEY,
    at      INTEGER NOT NULL,
    account TEXT    NOT NULL,
    action  TEXT    NOT NULL,
    target  TEXT    NOT NULL,
    detail  TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_at ON audit (at, id);
