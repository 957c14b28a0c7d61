-- Accounts: who a client request acts as, with its weight in fair share
-- and its quotas (0: none), and their tokens, kept by the sha256 of each
-- token's secret. The built-in admin account, whose token is
-- CLIENT_AUTH_TOKEN, exists from the start: what was made before accounts
-- is its.
CREATE TABLE accounts (
    name        text        NOT NULL PRIMARY KEY,
    admin       boolean     NOT NULL DEFAULT false,
    disabled    boolean     NOT NULL DEFAULT false,
    weight      integer     NOT NULL DEFAULT 1,
    max_running integer     NOT NULL DEFAULT 0,
    max_jobs    integer     NOT NULL DEFAULT 0,
    max_storage bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE account_tokens (
    hash       text        NOT NULL PRIMARY KEY,
    account    text        NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX account_tokens_account ON account_tokens (account);

INSERT INTO accounts (name, admin, created_at, updated_at)
VALUES ('admin', true, date_trunc('milliseconds', now()), date_trunc('milliseconds', now()));
