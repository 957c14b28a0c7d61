-- The arguments of tree tasks: JSON values given at submission, and the
-- results of upstream tasks as they arrive.
CREATE TABLE task_args (
    task_id     text    NOT NULL,
    position    integer NOT NULL,
    value       bytea,            -- NULL until an upstream's result arrives
    upstream_id text    NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, position)
);
