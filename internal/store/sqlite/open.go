package sqlite

import (
	"context"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// sqlTaskListOpen reads tasks_claim_open, which holds the pending chunks
// of jobs that untrusted workers may run, and the chunks being voted on
// that have a pending ballot, with their voters: the accounts whose
// workers hold or completed one of its ballots, passed over on the index
// entry, before the row is read.
var sqlTaskListOpen = newStatement(`SELECT ` + taskColumns + ` FROM tasks AS t INDEXED BY tasks_claim_open
	WHERE (state = 'pending' OR (state = 'leased' AND voters <> '')) AND workers <> ''
	AND instr(voters, ',' || ?1 || ',') = 0 AND run_after IS NULL
	AND (?2 = '[]' OR workload IN (SELECT value FROM json_each(?2))) AND (NOT ?4 OR state = 'leased')
	AND (?5 = '[]' OR id NOT IN (SELECT value FROM json_each(?5)))
	AND (?6 = '[]' OR state = 'leased' OR owner NOT IN (SELECT value FROM json_each(?6)))
	AND kind = 'chunk' AND (state = 'leased' OR workers = 'any' OR owner = ?1)
	ORDER BY priority DESC, job_created_at, job_id, chunk_index LIMIT ?3`)

// TaskListOpen returns the runnable tasks an untrusted worker of
// p.Account may take (see store.Querier). SQLite has one writer, so no
// other transaction takes them before this one ends.
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
	out, err := q.tasks(ctx, true, sqlTaskListOpen, p.Account, jsonArray(workloads), p.Limit, boolArg(p.BallotsOnly), jsonArray(skip), jsonArray(capped))
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
