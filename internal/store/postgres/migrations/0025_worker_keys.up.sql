-- Worker keys: an account's own machines, each kept by the sha256 of its
-- key's secret. A key is untrusted until an admin trusts it; a revoked
-- key's row is deleted.
CREATE TABLE worker_keys (
    account    text        NOT NULL,
    name       text        NOT NULL,
    hash       text        NOT NULL UNIQUE,
    trusted    boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (account, name)
);
