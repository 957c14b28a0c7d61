-- Messages to other shards, written in the same transaction as the change
-- that causes them and deleted once the receiving shard acknowledges them.
-- A NULL next_attempt_at marks a message the receiver refused for good.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    shard           TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;

