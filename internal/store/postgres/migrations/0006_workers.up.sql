-- Workers as the coordinators last saw them, for the dashboard. Written at
-- most every few seconds per worker and process, never in a claim's
-- transaction.
CREATE TABLE workers (
    id             text        NOT NULL PRIMARY KEY,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    last_heartbeat timestamptz
);

CREATE INDEX workers_last_seen ON workers (last_seen);

-- The roots of general trees, newest first.
CREATE INDEX tasks_tree_roots ON tasks (created_at, id) WHERE kind = 'tree' AND id = job_id;
