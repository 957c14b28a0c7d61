-- The data plane: uploads, chunks cut from them as byte ranges, task logs.

ALTER TABLE jobs ADD COLUMN upload_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN input_header BLOB; -- the header line chunks repeat; NULL when none

ALTER TABLE tasks ADD COLUMN input_offset INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN input_length INTEGER NOT NULL DEFAULT 0;

CREATE TABLE uploads (
    id         TEXT    NOT NULL PRIMARY KEY,
    sha256     TEXT    NOT NULL,
    bytes      INTEGER NOT NULL,
    rows       INTEGER NOT NULL,
    blob_key   TEXT    NOT NULL,
    blob_bytes INTEGER NOT NULL,
    created_at INTEGER
) STRICT;

-- Log lines in the order they arrived; the rowid is the line's ID.
CREATE TABLE task_logs (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    created_at INTEGER,
    line       TEXT    NOT NULL
) STRICT;
CREATE INDEX task_logs_task ON task_logs (task_id, id);
