package sqlite

import (
	"context"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlTaskListOpen reads tasks_claim_open, which holds the pending tasks of
// jobs that untrusted workers may run, and their voters: a replica whose
// chunk the account ran already is passed over on the index entry, before
// its row is read. The subquery then checks the replicas leased or
// completed since. ?3 is the account followed by '/', which starts the
// lease owner of each of its keys' workers.
var sqlTaskListOpen = newStatement(`SELECT ` + taskColumns + ` FROM tasks AS t INDEXED BY tasks_claim_open
	WHERE state = 'pending' AND workers <> '' AND instr(voters, ',' || ?1 || ',') = 0 AND run_after IS NULL
	AND (?2 = '[]' OR workload IN (SELECT value FROM json_each(?2))) AND (NOT ?5 OR kind = 'replica')
	AND (?6 = '[]' OR id NOT IN (SELECT value FROM json_each(?6)))
	AND CASE kind
		WHEN 'chunk' THEN workers = 'any' OR owner = ?1
		WHEN 'replica' THEN NOT EXISTS (SELECT 1 FROM tasks AS s
			WHERE s.job_id = t.job_id AND s.kind = 'replica' AND s.chunk_index = t.chunk_index
			AND s.state IN ('leased', 'completed') AND substr(s.lease_owner, 1, length(?3)) = ?3)
		ELSE 0 END
	ORDER BY priority DESC, job_created_at, job_id, chunk_index LIMIT ?4`)

// TaskListOpen returns the runnable tasks an untrusted worker of
// p.Account may take (see store.Querier). SQLite has one writer, so no
// other transaction takes them before this one ends.
func (q *querier) TaskListOpen(ctx context.Context, p *store.TaskListOpenParams) ([]*domain.Task, error) {
	workloads := p.Workloads
	if workloads == nil {
		workloads = []string{}
	}
	skip := p.Skip
	if skip == nil {
		skip = []string{}
	}
	out, err := q.tasks(ctx, true, sqlTaskListOpen, p.Account, jsonArray(workloads), p.Account+"/", p.Limit, boolArg(p.ReplicasOnly), jsonArray(skip))
	if err != nil {
		return nil, translate(err, "list the tasks open to %s", p.Account)
	}
	return out, nil
}

// sqlTaskCountVoting reads the job's leased chunks from
// tasks_job_kind_state, as many as limit at most.
var sqlTaskCountVoting = newStatement(`SELECT count(*) FROM (SELECT 1 FROM tasks
	WHERE job_id = ?1 AND kind = 'chunk' AND state = 'leased' AND lease_owner = ?2 LIMIT ?3)`)

// TaskCountVoting counts the job's chunks being voted on, up to limit.
func (q *querier) TaskCountVoting(ctx context.Context, jobID string, limit int) (int, error) {
	var n int
	err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&n) }, sqlTaskCountVoting, jobID, domain.QuorumLeaseOwner, limit)
	if err != nil {
		return 0, translate(err, "count the chunks of job %s voted on", jobID)
	}
	return n, nil
}
