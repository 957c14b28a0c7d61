-- Worker keys: an account's own machines, each kept by the sha256 of its
-- key's secret. A key is untrusted until an admin trusts it; a revoked
-- key's row is deleted.
CREATE TABLE worker_keys (
    account    TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    hash       TEXT    NOT NULL UNIQUE,
    trusted    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (account, name)
) STRICT;
