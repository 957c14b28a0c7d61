package postgres

import (
	"context"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlTaskListOpen reads tasks_claim_open, which holds the pending chunks
// of jobs that untrusted workers may run, and the chunks being voted on
// that have a pending ballot, with their voters: the accounts whose
// workers hold or completed one of its ballots, passed over on the index
// entry. It locks what it returns, passing over rows that concurrent
// claims or results hold.
const sqlTaskListOpen = `SELECT ` + taskColumns + ` FROM tasks AS t
WHERE (state = 'pending' OR (state = 'leased' AND voters <> '')) AND workers <> ''
AND strpos(voters, ',' || $1 || ',') = 0 AND run_after IS NULL
AND (cardinality($2::text[]) = 0 OR workload = ANY($2)) AND (NOT $4 OR state = 'leased')
AND NOT (id = ANY($5)) AND (state = 'leased' OR NOT (owner = ANY($6)))
AND kind = 'chunk' AND (state = 'leased' OR workers = 'any' OR owner = $1)
ORDER BY priority DESC, job_created_at NULLS FIRST, job_id, chunk_index
LIMIT $3
FOR UPDATE OF t SKIP LOCKED`

// TaskListOpen returns the runnable tasks an untrusted worker of
// p.Account may take (see store.Querier).
func (q *querier) TaskListOpen(ctx context.Context, p *store.TaskListOpenParams) ([]*domain.Task, error) {
	workloads := p.Workloads
	if workloads == nil {
		workloads = []string{}
	}
	skip, capped := p.Skip, p.SkipPendingOf
	if skip == nil {
		skip = []string{}
	}
	if capped == nil {
		capped = []string{}
	}
	rows, err := q.db.Query(ctx, sqlTaskListOpen, p.Account, workloads, p.Limit, p.BallotsOnly, skip, capped)
	if err != nil {
		return nil, translate(err, "list the tasks open to %s", p.Account)
	}
	return collectTasks(rows, "list the tasks open to %s", p.Account)
}

// sqlTaskCountVoting reads the job's leased chunks, as many as $3 at most.
const sqlTaskCountVoting = `SELECT count(*) FROM (SELECT 1 FROM tasks
WHERE job_id = $1 AND kind = 'chunk' AND state = 'leased' AND lease_owner = $2 LIMIT $3) AS v`

// TaskCountVoting counts the job's chunks being voted on, up to limit.
func (q *querier) TaskCountVoting(ctx context.Context, jobID string, limit int) (int, error) {
	var n int
	if err := q.db.QueryRow(ctx, sqlTaskCountVoting, jobID, domain.QuorumLeaseOwner, limit).Scan(&n); err != nil {
		return 0, translate(err, "count the chunks of job %s voted on", jobID)
	}
	return n, nil
}
