-- The arguments of tree tasks: JSON values given at submission, and the
-- results of upstream tasks as they arrive.
CREATE TABLE task_args (
    task_id     TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    value       TEXT,             -- NULL until an upstream's result arrives
    upstream_id TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, position)
) STRICT;
