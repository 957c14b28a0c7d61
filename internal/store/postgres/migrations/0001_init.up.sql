-- Jobs and their tasks. Zero times are NULL; empty strings stay empty except
-- idempotency_key, which is NULL when the client sent none.

CREATE TABLE jobs (
    id              text        PRIMARY KEY,
    name            text        NOT NULL DEFAULT '',
    workload        text        NOT NULL,
    parameters      text        NOT NULL DEFAULT '{}',
    chunk_rows      integer     NOT NULL,
    has_header      boolean     NOT NULL,
    top_k           integer     NOT NULL,
    score_column    text        NOT NULL,
    sort_order      text        NOT NULL,
    max_attempts    integer     NOT NULL,
    lease_seconds   integer     NOT NULL,
    priority        integer     NOT NULL,
    status          text        NOT NULL,
    error           text        NOT NULL DEFAULT '',
    root_task_id    text        NOT NULL DEFAULT '',
    chunk_count     integer     NOT NULL,
    idempotency_key text,
    request_hash    text        NOT NULL DEFAULT '',
    result          bytea,
    result_sha256   text        NOT NULL DEFAULT '',
    created_at      timestamptz,
    updated_at      timestamptz,
    finished_at     timestamptz,
    version         bigint      NOT NULL
);

CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- JobList: newest first, all jobs or those of one status.
CREATE INDEX jobs_created ON jobs (created_at DESC, id DESC);
CREATE INDEX jobs_status_created ON jobs (status, created_at DESC, id DESC);

CREATE TABLE tasks (
    id                text        PRIMARY KEY,
    job_id            text        NOT NULL DEFAULT '',
    kind              text        NOT NULL,
    workload          text        NOT NULL,
    chunk_index       integer     NOT NULL,
    state             text        NOT NULL,
    attempt           integer     NOT NULL,
    max_attempts      integer     NOT NULL,
    lease_seconds     integer     NOT NULL,
    lease_owner       text        NOT NULL DEFAULT '',
    lease_expires_at  timestamptz,
    run_after         timestamptz,
    priority          integer     NOT NULL,
    job_created_at    timestamptz,
    input_uri         text        NOT NULL DEFAULT '',
    input_sha256      text        NOT NULL DEFAULT '',
    input_bytes       bigint      NOT NULL DEFAULT 0,
    result            bytea,
    metrics           bytea,      -- the worker's bytes exactly; NULL when none
    error             text        NOT NULL DEFAULT '',
    downstream_id     text        NOT NULL DEFAULT '',
    pending_upstreams integer     NOT NULL DEFAULT 0,
    created_at        timestamptz,
    updated_at        timestamptz,
    finished_at       timestamptz,
    version           bigint      NOT NULL
);

-- The claim index holds runnable tasks only, in claim order, so a claim
-- reads the first entries whatever the backlog of other states. A NULL
-- job_created_at (a tree task of no job) is the earliest instant.
CREATE INDEX tasks_claim ON tasks (priority DESC, job_created_at NULLS FIRST, job_id, chunk_index)
    WHERE state = 'pending';
-- The reaper: leased tasks by lease expiry.
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE state = 'leased';
-- A job's tasks of one kind in chunk order (TaskList, TaskResults).
CREATE INDEX tasks_job_kind_index ON tasks (job_id, kind, chunk_index);
-- A job's tasks of one kind by state (JobTaskCounts, TaskCancelJob).
CREATE INDEX tasks_job_kind_state ON tasks (job_id, kind, state);
