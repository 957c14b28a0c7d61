-- Fair share (SPEC §9). A fair claim finds the accounts with runnable
-- work, and an account's jobs, by skipping through tasks_fair
-- (tasks_fair_workload for claims of named workloads) one owner, or one
-- job, at a time; it then takes a job's tasks in chunk order from the same
-- index. Priority is negated and a missing job creation time is
-- -infinity, so that a row comparison of the three walks the index
-- forwards. As with tasks_claim, kind <> '' (true of every task) keeps the
-- planner from walking tasks_fair, and filtering on workload, for a claim
-- of named workloads.
CREATE INDEX tasks_fair ON tasks (kind, owner, (-priority), (COALESCE(job_created_at, '-infinity')), job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL AND kind <> '';
CREATE INDEX tasks_fair_workload ON tasks (kind, workload, owner, (-priority), (COALESCE(job_created_at, '-infinity')), job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
-- A claim counts an account's (and a job's) leased tasks from here: the
-- counts are derived, never kept in a row that every claim would update
-- and so serialize on.
CREATE INDEX tasks_leased ON tasks (owner, job_id) WHERE state = 'leased' AND kind <> 'stitch';

-- When a claim last served each account (plus the place of the account's
-- last task in that claim, in microseconds), for the tie-break between
-- accounts with as many leased tasks per weight: the account served
-- longest ago goes first. A claim passes over a row another claim holds
-- (SKIP LOCKED) rather than wait for it.
CREATE TABLE account_served (
    account   text        NOT NULL PRIMARY KEY,
    served_at timestamptz NOT NULL
);
