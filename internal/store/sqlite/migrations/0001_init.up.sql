-- The jobs and tasks of SciMesh. Times are INTEGER microseconds since the Unix
-- epoch, UTC; NULL stands for Go's zero time.Time.

CREATE TABLE jobs (
    id              TEXT    NOT NULL PRIMARY KEY,
    name            TEXT    NOT NULL DEFAULT '',
    workload        TEXT    NOT NULL,
    parameters      TEXT    NOT NULL DEFAULT '{}',
    chunk_rows      INTEGER NOT NULL,
    has_header      INTEGER NOT NULL,
    top_k           INTEGER NOT NULL,
    score_column    TEXT    NOT NULL,
    sort_order      TEXT    NOT NULL,
    max_attempts    INTEGER NOT NULL,
    lease_seconds   INTEGER NOT NULL,
    priority        INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    error           TEXT    NOT NULL DEFAULT '',
    root_task_id    TEXT    NOT NULL DEFAULT '',
    chunk_count     INTEGER NOT NULL,
    idempotency_key TEXT,   -- NULL when the client sent none
    request_hash    TEXT    NOT NULL DEFAULT '',
    result          BLOB,
    result_sha256   TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER,
    updated_at      INTEGER,
    finished_at     INTEGER,
    version         INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- JobList, newest first; scanned backwards.
CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_status_created ON jobs (status, created_at, id);

CREATE TABLE tasks (
    id                TEXT    NOT NULL PRIMARY KEY,
    job_id            TEXT    NOT NULL DEFAULT '',
    kind              TEXT    NOT NULL,
    workload          TEXT    NOT NULL,
    chunk_index       INTEGER NOT NULL,
    state             TEXT    NOT NULL,
    attempt           INTEGER NOT NULL,
    max_attempts      INTEGER NOT NULL,
    lease_seconds     INTEGER NOT NULL,
    lease_owner       TEXT    NOT NULL DEFAULT '',
    lease_expires_at  INTEGER,
    run_after         INTEGER,
    priority          INTEGER NOT NULL,
    job_created_at    INTEGER,
    input_uri         TEXT    NOT NULL DEFAULT '',
    input_sha256      TEXT    NOT NULL DEFAULT '',
    input_bytes       INTEGER NOT NULL DEFAULT 0,
    result            BLOB,
    metrics           TEXT,   -- NULL when the worker reported none
    error             TEXT    NOT NULL DEFAULT '',
    downstream_id     TEXT    NOT NULL DEFAULT '',
    pending_upstreams INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER,
    updated_at        INTEGER,
    finished_at       INTEGER,
    version           INTEGER NOT NULL
) STRICT;

-- The claim index: runnable tasks in claim order. Its trailing columns let the
-- claim test run_after, kind and workload without reading the table, so tasks
-- in backoff or of other kinds cost an index step, not a row fetch.
CREATE INDEX tasks_claim ON tasks (priority DESC, job_created_at, job_id, chunk_index, run_after, kind, workload)
    WHERE state = 'pending';
-- The reaper's index: leases by expiry.
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE state = 'leased';
-- A job's tasks by kind: listing by index; counts, results and cancellation by state.
CREATE INDEX tasks_job_kind_index ON tasks (job_id, kind, chunk_index);
CREATE INDEX tasks_job_kind_state ON tasks (job_id, kind, state, chunk_index);
