package postgres

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

var (
	// sqlTaskClaim leases up to $5 tasks in one statement. The subquery
	// walks the partial index tasks_claim in claim order and locks what it
	// picks; SKIP LOCKED passes over rows another claimer holds, so
	// concurrent claimers take different tasks and never wait on each
	// other. A row that stopped being pending before we locked it is
	// re-checked and dropped. An empty $4 means any workload. The ORDER BY
	// must match the index column for column, NULLS FIRST included.
	sqlTaskClaim = claimSQL("kind = ANY($3::text[])")
	// sqlTaskClaimStitch is the claim of coordinators' stitch tasks, which
	// have a partial index of their own (its predicate must appear as
	// literals): it must not walk past the backlog of pending chunks.
	sqlTaskClaimStitch = claimSQL("kind = 'stitch' AND $3::text[] IS NOT NULL")
)

const (
	sqlTaskListExpired = `SELECT ` + taskColumns + ` FROM tasks
WHERE state = 'leased' AND lease_expires_at <= $1
ORDER BY lease_expires_at
LIMIT $2`
)

// claimSQL is the claim with kinds as the predicate on the task's kind.
// It sets the attempt's deadline from the task's timeout (none when 0) and
// caps the lease at it (LEAST passes over the NULL of no timeout).
func claimSQL(kinds string) string {
	return `UPDATE tasks
SET state = 'leased', lease_owner = $1, attempt = attempt + 1,
	lease_expires_at = $2::timestamptz + LEAST(lease_seconds, NULLIF(timeout_seconds, 0)) * interval '1 second',
	attempt_deadline = $2::timestamptz + NULLIF(timeout_seconds, 0) * interval '1 second',
	updated_at = $2::timestamptz, version = version + 1
FROM (
	SELECT id AS claim_id FROM tasks
	WHERE state = 'pending'
		AND (run_after IS NULL OR run_after <= $2::timestamptz)
		AND ` + kinds + `
		AND (cardinality($4::text[]) = 0 OR workload = ANY($4::text[]))
	ORDER BY priority DESC, job_created_at NULLS FIRST, job_id, chunk_index
	LIMIT $5
	FOR UPDATE SKIP LOCKED
) AS claimable
WHERE id = claim_id
RETURNING ` + taskColumns
}

// TaskClaim leases up to p.Max claimable tasks in one statement and returns
// them leased, in no particular order.
func (q *querier) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	if p.Max <= 0 || len(p.Kinds) == 0 {
		return nil, nil
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
	if len(kinds) == 1 && kinds[0] == string(domain.KindStitch) {
		query = sqlTaskClaimStitch
	}
	rows, err := q.db.Query(ctx, query, p.Owner, p.Now, kinds, workloads, p.Max)
	if err != nil {
		return nil, translate(err, "claim tasks for %s", p.Owner)
	}
	return collectTasks(rows, "claim tasks for %s", p.Owner)
}

// TaskListExpired returns the leased tasks whose lease expired at or before
// now, oldest expiry first, at most limit of them (all when limit <= 0).
func (q *querier) TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*domain.Task, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := q.db.Query(ctx, sqlTaskListExpired, now, lim)
	if err != nil {
		return nil, translate(err, "list expired leases")
	}
	return collectTasks(rows, "list expired leases")
}
