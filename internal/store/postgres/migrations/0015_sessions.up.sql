-- The dashboard's sessions, each by the sha256 of its cookie's secret:
-- logging out deletes the row, which ends the session in every replica
-- at once. Expired rows are deleted by the worker pruner.
CREATE TABLE ui_sessions (
    id         text        NOT NULL PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at);
