-- Accounts: who a client request acts as, with its weight in fair share
-- and its quotas (0: none), and their tokens, kept by the sha256 of each
-- token's secret. The built-in admin account, whose token is
-- CLIENT_AUTH_TOKEN, exists from the start: what was made before accounts
-- is its.
CREATE TABLE accounts (
    name        TEXT    NOT NULL PRIMARY KEY,
    admin       INTEGER NOT NULL DEFAULT 0,
    disabled    INTEGER NOT NULL DEFAULT 0,
    weight      INTEGER NOT NULL DEFAULT 1,
    max_running INTEGER NOT NULL DEFAULT 0,
    max_jobs    INTEGER NOT NULL DEFAULT 0,
    max_storage INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE account_tokens (
    hash       TEXT    NOT NULL PRIMARY KEY,
    account    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE INDEX account_tokens_account ON account_tokens (account);

INSERT INTO accounts (name, admin, created_at, updated_at)
VALUES ('admin', 1, strftime('%s', 'now') * 1000000, strftime('%s', 'now') * 1000000);
