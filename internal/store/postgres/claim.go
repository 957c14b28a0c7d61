package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

var (
	// sqlTaskClaim leases up to $5 (the length of $1) tasks of any workload in one
	// statement; sqlTaskClaimWorkloads those of the workloads in $4. For
	// each kind in $3 (and each workload), a LATERAL subquery walks its
	// range of tasks_claim (tasks_claim_workload) in claim order, so a
	// claim reads the first entries of its own kind and workload whatever
	// the backlog of others, and locks what it picks; SKIP LOCKED passes
	// over rows another claimer holds, so concurrent claimers take
	// different tasks and never wait on each other. The outer query keeps
	// the first $5 of those candidates in claim order (the others stay
	// locked until the claim commits, a moment later). A row that stopped
	// being pending before we locked it is re-checked and dropped. Each
	// ORDER BY must match its index column for column, NULLS FIRST
	// included, and the index predicate must appear as literals.
	sqlTaskClaim = claimStatements(`unnest($3::text[]) AS k(kind) CROSS JOIN LATERAL (
		SELECT t.id, t.priority, t.job_created_at, t.job_id, t.chunk_index FROM tasks t
		WHERE t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind <> '' AND t.kind = k.kind AND cardinality($4::text[]) = 0
		ORDER BY t.kind, t.priority DESC, t.job_created_at NULLS FIRST, t.job_id, t.chunk_index
		LIMIT {limit}
		FOR UPDATE SKIP LOCKED) AS c`)
	sqlTaskClaimWorkloads = claimStatements(`unnest($3::text[]) AS k(kind) CROSS JOIN unnest($4::text[]) AS w(workload) CROSS JOIN LATERAL (
		SELECT t.id, t.priority, t.job_created_at, t.job_id, t.chunk_index FROM tasks t
		WHERE t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind = k.kind AND t.workload = w.workload
		ORDER BY t.kind, t.workload, t.priority DESC, t.job_created_at NULLS FIRST, t.job_id, t.chunk_index
		LIMIT {limit}
		FOR UPDATE SKIP LOCKED) AS c`)
	// sqlTaskClaimKind and sqlTaskClaimKindWorkload are the same claims
	// for the common case of one kind (and one workload), without the
	// LATERAL join over the arrays: the planner then finds a generic plan
	// as good as a custom one and keeps it, rather than plan every claim
	// again (a third of a small claim's time when it did). The kind of a
	// claim of a workload is a subquery so that the planner cannot prove
	// tasks_claim's kind <> '' from it: that index must not serve it.
	sqlTaskClaimKind = claimStatements(`(
		SELECT t.id, t.priority, t.job_created_at, t.job_id, t.chunk_index FROM tasks t
		WHERE t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind <> '' AND t.kind = ($3::text[])[1] AND cardinality($4::text[]) = 0
		ORDER BY t.kind, t.priority DESC, t.job_created_at NULLS FIRST, t.job_id, t.chunk_index
		LIMIT {limit}
		FOR UPDATE SKIP LOCKED) AS c`)
	sqlTaskClaimKindWorkload = claimStatements(`(
		SELECT t.id, t.priority, t.job_created_at, t.job_id, t.chunk_index FROM tasks t
		WHERE t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind = (SELECT ($3::text[])[1]) AND t.workload = ($4::text[])[1]
		ORDER BY t.kind, t.workload, t.priority DESC, t.job_created_at NULLS FIRST, t.job_id, t.chunk_index
		LIMIT {limit}
		FOR UPDATE SKIP LOCKED) AS c`)
	// sqlTaskClaimStitch is the claim of coordinators' stitch tasks, which
	// have a partial index of their own.
	sqlTaskClaimStitch = claimStatements(`(
		SELECT id, priority, job_created_at, job_id, chunk_index FROM tasks
		WHERE state = 'pending' AND kind = 'stitch' AND $3::text[] IS NOT NULL AND $4::text[] IS NOT NULL
			AND (run_after IS NULL OR run_after <= $2::timestamptz)
		ORDER BY priority DESC, job_created_at NULLS FIRST, job_id, chunk_index
		LIMIT {limit}
		FOR UPDATE SKIP LOCKED) AS c`)

	// sqlTaskMakeRunnable makes tasks whose backoff passed runnable (no
	// run_after), reading tasks_backoff, so that claims find them in the
	// claim indexes; SKIP LOCKED leaves rows a concurrent claim or write
	// holds to a later call.
	sqlTaskMakeRunnable = `UPDATE tasks SET run_after = NULL, version = version + 1
WHERE id IN (
	SELECT id FROM tasks
	WHERE state = 'pending' AND run_after IS NOT NULL AND run_after <= $1
	ORDER BY run_after
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`
)

// claimLimits are the LIMITs a claim's candidates are written with: a
// claim of n tasks uses the least one of at least n, and keeps the first
// n candidates. The others, fewer than n, stay locked until the statement
// ends, a moment later: a claim of another process (or of other workloads)
// passes over them meanwhile, as over any row a claim holds.
// A literal LIMIT lets PostgreSQL plan a claim once per connection and
// size: with a parameter it plans for a tenth of the index range, a
// generic plan far dearer than the custom one of a small LIMIT, and so it
// planned every claim again.
var claimLimits = [...]int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// claimStatement is one claim, written once per LIMIT of claimLimits and
// once with the LIMIT $5 of claims larger than the last (which the engine,
// claiming at most 1,000 at once, does not make).
type claimStatement struct {
	sized     [len(claimLimits)]string
	unbounded string
}

// claimStatements writes the claim whose candidates ({limit} in
// candidates is their LIMIT) come from candidates.
func claimStatements(candidates string) *claimStatement {
	c := &claimStatement{unbounded: claimSQL(strings.ReplaceAll(candidates, "{limit}", "$5"))}
	for i, l := range claimLimits {
		c.sized[i] = claimSQL(strings.ReplaceAll(candidates, "{limit}", strconv.Itoa(l)))
	}
	return c
}

// of is the statement of a claim of n tasks.
func (c *claimStatement) of(n int) string {
	for i, l := range claimLimits {
		if n <= l {
			return c.sized[i]
		}
	}
	return c.unbounded
}

// claimSQL is the claim whose candidates come from candidates (a FROM
// item c with the claim-order columns). The candidates are numbered in
// claim order and the first $5 in that order kept, the n-th for the n-th
// owner of $1; the ID ends both orders, so that equal keys (a tree's tasks
// at one position) are ordered the same in both and no kept candidate can
// be numbered past the owners. It sets
// the attempt's deadline from the task's timeout (none when 0) and caps
// the lease at it (LEAST passes over the NULL of no timeout). The same
// statement moves the claimed tasks' pending jobs to running (a job row
// that is no longer pending is passed over; a pending one that another
// transaction holds is waited for).
func claimSQL(candidates string) string {
	return `WITH claimed AS (
UPDATE tasks
SET state = 'leased', lease_owner = ($1::text[])[claimable.n], attempt = attempt + 1,
	lease_expires_at = $2::timestamptz + LEAST(lease_seconds, NULLIF(timeout_seconds, 0)) * interval '1 second',
	attempt_deadline = $2::timestamptz + NULLIF(timeout_seconds, 0) * interval '1 second',
	run_after = NULL, updated_at = $2::timestamptz, leased_at = $2::timestamptz, version = version + 1
FROM (
	SELECT c.id AS claim_id,
		row_number() OVER (ORDER BY c.priority DESC, c.job_created_at NULLS FIRST, c.job_id, c.chunk_index, c.id) AS n
	FROM ` + candidates + `
	ORDER BY c.priority DESC, c.job_created_at NULLS FIRST, c.job_id, c.chunk_index, c.id
	LIMIT $5
) AS claimable
WHERE id = claimable.claim_id
RETURNING ` + taskColumns + `
), running AS (
	UPDATE jobs SET status = 'running', updated_at = $2::timestamptz, version = version + 1
	WHERE id IN (SELECT job_id FROM claimed) AND status = 'pending'
)
SELECT ` + taskColumns + ` FROM claimed`
}

// TaskClaim leases up to len(p.Owners) claimable tasks in one statement,
// the i-th in claim order to p.Owners[i], marks their pending jobs running
// in it, and returns them leased, in no particular order.
func (q *querier) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	if len(p.Owners) == 0 || len(p.Kinds) == 0 {
		return nil, nil
	}
	if p.Fair && len(p.Kinds) == 1 && p.Kinds[0] != domain.KindStitch {
		// Outside a transaction each round of a fair claim commits on its
		// own: the tasks of the rounds before an error are leased and
		// must be handed out.
		tasks, err := store.ClaimFair(ctx, q, q.fair, p)
		if err != nil && (q.tx != nil || len(tasks) == 0) {
			return nil, err
		}
		return tasks, nil
	}
	kinds := make([]string, len(p.Kinds))
	for i, k := range p.Kinds {
		kinds[i] = string(k)
	}
	workloads := p.Workloads
	if workloads == nil {
		workloads = []string{} // cardinality(NULL) is NULL, not 0
	}
	query := sqlTaskClaim
	switch {
	case len(kinds) == 1 && kinds[0] == string(domain.KindStitch):
		query = sqlTaskClaimStitch
	case len(kinds) == 1 && len(workloads) == 1:
		query = sqlTaskClaimKindWorkload
	case len(kinds) == 1 && len(workloads) == 0:
		query = sqlTaskClaimKind
	case len(workloads) > 0:
		query = sqlTaskClaimWorkloads
	}
	rows, err := q.db.Query(ctx, query.of(len(p.Owners)), p.Owners, p.Now, kinds, workloads, len(p.Owners))
	if err != nil {
		return nil, translate(err, "claim tasks for %s", p.Owners[0])
	}
	return collectTasks(rows, "claim tasks for %s", p.Owners[0])
}

// TaskMakeRunnable clears the RunAfter of up to p.Limit tasks whose backoff
// passed, soonest first, and returns how many it cleared.
func (q *querier) TaskMakeRunnable(ctx context.Context, p *store.TaskMakeRunnableParams) (int, error) {
	tag, err := q.db.Exec(ctx, sqlTaskMakeRunnable, p.Now, p.Limit)
	if err != nil {
		return 0, translate(err, "make tasks past their backoff runnable")
	}
	return int(tag.RowsAffected()), nil
}
