package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Claims. For each kind (and each workload named) the claim reads the
// first entries of its range of tasks_claim (tasks_claim_workload), which
// hold runnable tasks only (pending, no run_after), replicas left out, in
// claim order behind kind (and workload), so a claim of a rare workload
// never walks the backlog of others; it keeps the first of those
// candidates in claim order and leases them in one UPDATE that checks them
// again. state = 'pending', run_after IS NULL and kind <> 'replica' must
// stay literals for SQLite to use a partial index. Stitch tasks, claimed by coordinators alone, have an index of
// their own.
var (
	sqlTaskClaimCandidates = newStatement(`SELECT rowid, priority, job_created_at, job_id, chunk_index FROM tasks INDEXED BY tasks_claim
	WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica' AND kind = ?1
	ORDER BY kind, priority DESC, job_created_at, job_id, chunk_index LIMIT ?2`)
	sqlTaskClaimWorkloadCandidates = newStatement(`SELECT rowid, priority, job_created_at, job_id, chunk_index FROM tasks INDEXED BY tasks_claim_workload
	WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica' AND kind = ?1 AND workload = ?3
	ORDER BY kind, workload, priority DESC, job_created_at, job_id, chunk_index LIMIT ?2`)
	// ?1 is a JSON array of [rowid, owner] pairs.
	sqlTaskClaimRows = newStatement(`UPDATE tasks SET state = 'leased', lease_owner = c.owner, attempt = attempt + 1,
	lease_expires_at = ?2 + min(lease_seconds, CASE WHEN timeout_seconds > 0 THEN timeout_seconds ELSE lease_seconds END) * 1000000,
	attempt_deadline = CASE WHEN timeout_seconds > 0 THEN ?2 + timeout_seconds * 1000000 END,
	run_after = NULL, updated_at = ?2, leased_at = ?2, version = version + 1
	FROM (SELECT value ->> 0 AS rid, value ->> 1 AS owner FROM json_each(?1)) AS c
	WHERE tasks.rowid = c.rid AND state = 'pending' AND (run_after IS NULL OR (kind = 'stitch' AND run_after <= ?2))
	RETURNING ` + taskColumns)
	sqlTaskClaimStitchCandidates = newStatement(`SELECT rowid, priority, job_created_at, job_id, chunk_index FROM tasks INDEXED BY tasks_claim_stitch
	WHERE state = 'pending' AND kind = 'stitch' AND (run_after IS NULL OR run_after <= ?1)
	ORDER BY priority DESC, job_created_at, job_id, chunk_index LIMIT ?2`)
	// The ID list is a JSON array, so one prepared statement serves any
	// number of IDs. The unary + keeps the planner on the primary key
	// rather than the index of every pending job.
	sqlJobMarkRunning = newStatement(`UPDATE jobs SET status = 'running', updated_at = ?, version = version + 1
	WHERE id IN (SELECT value FROM json_each(?)) AND +status = 'pending'`)
	// sqlTaskMakeRunnable makes the tasks whose backoff passed runnable (no
	// run_after), reading tasks_backoff, so that claims find them.
	sqlTaskMakeRunnable = newStatement(`UPDATE tasks SET run_after = NULL, version = version + 1
	WHERE rowid IN (
		SELECT rowid FROM tasks INDEXED BY tasks_backoff
		WHERE state = 'pending' AND run_after IS NOT NULL AND run_after <= ?1
		ORDER BY run_after LIMIT ?2)`)
)

// claimCandidate is a runnable task's place in claim order.
type claimCandidate struct {
	rowid, priority int64
	jobCreated      sql.NullInt64
	jobID           string
	chunkIndex      int64
}

// compareClaim orders candidates as the claim does: priority (higher
// first), then oldest job (no creation time first), job ID, chunk index.
func compareClaim(a, b claimCandidate) int {
	if c := cmp.Compare(b.priority, a.priority); c != 0 {
		return c
	}
	if a.jobCreated.Valid != b.jobCreated.Valid {
		if !a.jobCreated.Valid {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.jobCreated.Int64, b.jobCreated.Int64), cmp.Compare(a.jobID, b.jobID), cmp.Compare(a.chunkIndex, b.chunkIndex))
}

// TaskClaim leases up to len(p.Owners) claimable tasks, the i-th in claim
// order to p.Owners[i], and marks their pending jobs running, in one
// transaction. No Kinds or no Owners claims nothing.
func (q *querier) TaskClaim(ctx context.Context, p *store.TaskClaimParams) ([]*domain.Task, error) {
	if len(p.Owners) == 0 || len(p.Kinds) == 0 {
		return nil, nil
	}
	now := p.Now.UnixMicro()
	n := len(p.Owners)
	var out []*domain.Task
	claim := func(q *querier) error {
		var cands []claimCandidate
		collect := func(query *statement, args ...any) error {
			return q.query(ctx, true, func(r scanner) error {
				var c claimCandidate
				if err := r.Scan(&c.rowid, &c.priority, &c.jobCreated, &c.jobID, &c.chunkIndex); err != nil {
					return err
				}
				cands = append(cands, c)
				return nil
			}, query, args...)
		}
		for _, k := range p.Kinds {
			if k == domain.KindStitch {
				if err := collect(sqlTaskClaimStitchCandidates, now, n); err != nil {
					return err
				}
				continue
			}
			if len(p.Workloads) == 0 {
				if err := collect(sqlTaskClaimCandidates, string(k), n); err != nil {
					return err
				}
				continue
			}
			for _, w := range p.Workloads {
				if err := collect(sqlTaskClaimWorkloadCandidates, string(k), n, w); err != nil {
					return err
				}
			}
		}
		if len(cands) == 0 {
			return nil
		}
		slices.SortFunc(cands, compareClaim)
		pairs := make([][2]any, 0, min(len(cands), n))
		for i, c := range cands[:min(len(cands), n)] {
			pairs = append(pairs, [2]any{c.rowid, p.Owners[i]})
		}
		b, _ := json.Marshal(pairs) // integers and strings always encode
		var err error
		if out, err = q.tasks(ctx, true, sqlTaskClaimRows, string(b), now); err != nil {
			return err
		}
		return q.markRunning(ctx, out, p.Now)
	}
	if p.Fair && len(p.Kinds) == 1 && p.Kinds[0] != domain.KindStitch {
		claim = func(q *querier) (err error) {
			out, err = store.ClaimFair(ctx, q, q.stmts.fair, p)
			return err
		}
	}
	var err error
	if q.tx != nil { // the caller's transaction keeps the statements together
		err = claim(q)
	} else {
		err = q.atomically(ctx, "task_claim", claim)
	}
	if err != nil {
		return nil, translate(err, "claim tasks for %s", p.Owners[0])
	}
	return out, nil
}

// markRunning moves the pending jobs of tasks, just leased, to running
// at now.
func (q *querier) markRunning(ctx context.Context, tasks []*domain.Task, now time.Time) error {
	var jobs []string
	for _, t := range tasks {
		if t.JobID != "" && !slices.Contains(jobs, t.JobID) {
			jobs = append(jobs, t.JobID)
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	_, err := q.exec(ctx, sqlJobMarkRunning, now.UnixMicro(), jsonArray(jobs))
	return err
}

// TaskMakeRunnable clears the RunAfter of up to p.Limit tasks whose backoff
// passed, soonest first, and returns how many it cleared.
func (q *querier) TaskMakeRunnable(ctx context.Context, p *store.TaskMakeRunnableParams) (int, error) {
	res, err := q.exec(ctx, sqlTaskMakeRunnable, p.Now.UnixMicro(), p.Limit)
	if err != nil {
		return 0, translate(err, "make tasks past their backoff runnable")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "make tasks past their backoff runnable")
	}
	return int(n), nil
}
