-- Messages to other shards, written in the same transaction as the change
-- that causes them and deleted once the receiving shard acknowledges them.
-- A NULL next_attempt_at marks a message the receiver refused for good.
CREATE TABLE outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shard           text        NOT NULL,
    kind            text        NOT NULL,
    payload         bytea       NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL
);

CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;

