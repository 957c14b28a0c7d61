-- The data plane: uploads, chunks cut from them as byte ranges, task logs.

ALTER TABLE jobs ADD COLUMN upload_id text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN input_header bytea; -- the header line chunks repeat; NULL when none

ALTER TABLE tasks ADD COLUMN input_offset bigint NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN input_length bigint NOT NULL DEFAULT 0;

CREATE TABLE uploads (
    id         text        PRIMARY KEY,
    sha256     text        NOT NULL,
    bytes      bigint      NOT NULL,
    rows       bigint      NOT NULL,
    blob_key   text        NOT NULL,
    blob_bytes bigint      NOT NULL,
    created_at timestamptz
);

-- Log lines in the order they arrived; id is the line's ID. A line is
-- bytea because a worker's output may hold bytes (NUL, invalid UTF-8) that
-- text refuses.
CREATE TABLE task_logs (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    text        NOT NULL,
    attempt    integer     NOT NULL,
    created_at timestamptz,
    line       bytea       NOT NULL
);
CREATE INDEX task_logs_task ON task_logs (task_id, id);
