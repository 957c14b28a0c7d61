package postgres

import (
	"context"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlTaskListOpen reads tasks_claim_open, which holds the pending tasks of
// jobs that untrusted workers may run and their voters (a replica whose
// chunk the account ran already is passed over on the index entry), and
// locks what it returns, passing over rows that concurrent claims hold.
// $3 is the account followed by '/', which starts the lease owner of
// each of its keys' workers. The siblings leased and completed are looked
// for apart, each a probe of tasks_job (job_id, kind, state, chunk_index)
// on all four: with state IN (…), plans were seen that scanned every
// replica of the job for each candidate (1 ms each).
const sqlTaskListOpen = `SELECT ` + taskColumns + ` FROM tasks AS t
WHERE state = 'pending' AND workers <> '' AND strpos(voters, ',' || $1 || ',') = 0 AND run_after IS NULL
AND (cardinality($2::text[]) = 0 OR workload = ANY($2)) AND (NOT $5 OR kind = 'replica')
AND NOT (id = ANY($6))
AND CASE kind
	WHEN 'chunk' THEN workers = 'any' OR owner = $1
	WHEN 'replica' THEN NOT EXISTS (SELECT 1 FROM tasks AS s
		WHERE s.job_id = t.job_id AND s.kind = 'replica' AND s.state = 'leased' AND s.chunk_index = t.chunk_index
		AND starts_with(s.lease_owner, $3))
	AND NOT EXISTS (SELECT 1 FROM tasks AS s
		WHERE s.job_id = t.job_id AND s.kind = 'replica' AND s.state = 'completed' AND s.chunk_index = t.chunk_index
		AND starts_with(s.lease_owner, $3))
	ELSE false END
ORDER BY priority DESC, job_created_at NULLS FIRST, job_id, chunk_index
LIMIT $4
FOR UPDATE OF t SKIP LOCKED`

// TaskListOpen returns the runnable tasks an untrusted worker of
// p.Account may take (see store.Querier).
func (q *querier) TaskListOpen(ctx context.Context, p *store.TaskListOpenParams) ([]*domain.Task, error) {
	workloads := p.Workloads
	if workloads == nil {
		workloads = []string{}
	}
	skip := p.Skip
	if skip == nil {
		skip = []string{}
	}
	rows, err := q.db.Query(ctx, sqlTaskListOpen, p.Account, workloads, p.Account+"/", p.Limit, p.ReplicasOnly, skip)
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
