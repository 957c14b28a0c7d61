-- Fair share (SPEC §9). A fair claim finds the accounts with runnable
-- work, and an account's jobs, by skipping through tasks_fair
-- (tasks_fair_workload for claims of named workloads) one owner, or one
-- job, at a time; it then takes a job's tasks in chunk order from the same
-- index. It counts an account's (and a job's) leased tasks from
-- tasks_leased, which holds leased tasks only: the counts are derived,
-- never kept in a row that every claim would update.
CREATE INDEX tasks_fair ON tasks (kind, owner, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
CREATE INDEX tasks_fair_workload ON tasks (kind, workload, owner, priority DESC, job_created_at, job_id, chunk_index)
    WHERE state = 'pending' AND run_after IS NULL;
CREATE INDEX tasks_leased ON tasks (owner, job_id) WHERE state = 'leased' AND kind <> 'stitch';

-- When a claim last served each account (microseconds since the epoch,
-- plus the place of the account's last task in that claim), for the
-- tie-break between accounts with as many leased tasks per weight: the
-- account served longest ago goes first.
CREATE TABLE account_served (
    account   TEXT    NOT NULL PRIMARY KEY,
    served_at INTEGER NOT NULL
) STRICT;
