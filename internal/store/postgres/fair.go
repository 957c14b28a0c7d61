package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Fair-share claims (store.ClaimFair). Each step is one statement outside
// any transaction, so a claim takes no lock but on the rows it leases, and
// concurrent claims (of other processes, other replicas) never wait for
// each other: SKIP LOCKED passes over what another holds, as in the FIFO
// claim. What one step reads, a concurrent claim may lease before the next
// step: across processes the order is fair as of a moment ago, never
// blocking, and each claim reads the counts again. The exception is
// max_running, which must hold across replicas: a claim that would give
// tasks to accounts with one first takes a transaction-scoped advisory
// lock per such account (in name order), then counts their leases again in
// the claim statement. Only claims of capped accounts wait, and only for
// each other.
//
// Accounts with runnable work, and an account's jobs, are found by
// skipping through tasks_fair (tasks_fair_workload) one key at a time: a
// recursive query whose every step is one probe of the index. Leased tasks
// are counted from tasks_leased, and only when there is a choice to make:
// a claim with one account with work (and no max_running) counts nothing.
// Every index's predicate appears as literals, and each ORDER BY matches
// its index column for column. As in the FIFO claim, the kind of a claim
// of named workloads is a subquery, so that the planner cannot prove
// tasks_fair's kind <> '' from it.

// fairSQL is a fair claim's statements for claims of any workload (any)
// or of named workloads.
type fairSQL struct {
	accounts, groups, claim string
}

// The index of tasks_fair after kind (and workload), its order.
const fairOrder = `t.owner, -t.priority, COALESCE(t.job_created_at, '-infinity'), t.job_id`

// fairRunnable is the condition of tasks_fair over any workload, kind $k.
func fairRunnable(k string) string {
	return `t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind <> '' AND t.kind = ` + k
}

// fairRunnableWorkload is the condition of tasks_fair_workload, kind $k
// and workload w.
func fairRunnableWorkload(k, w string) string {
	return `t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind = (SELECT ` + k + `) AND t.workload = ` + w
}

var (
	fairAny = fairSQL{
		// $1 kind.
		accounts: `WITH RECURSIVE o(owner) AS (
	(SELECT t.owner FROM tasks t WHERE ` + fairRunnable("$1::text") + ` ORDER BY t.kind, t.owner LIMIT 1)
	UNION ALL
	SELECT (SELECT t.owner FROM tasks t WHERE ` + fairRunnable("$1::text") + ` AND t.owner > o.owner ORDER BY t.kind, t.owner LIMIT 1)
	FROM o WHERE o.owner IS NOT NULL
)` + fairAccountsSelect,
		// $1 kind, $2 owners, $3 their limits, $4 no workloads, $5 the
		// most runnable tasks a group's count goes to.
		groups: `WITH RECURSIVE g(owner, lim, workload, n, np, c, job_id) AS (
	SELECT a.owner, a.lim, '', 1, f.np, f.c, f.job_id FROM unnest($2::text[], $3::int[]) AS a(owner, lim) CROSS JOIN LATERAL (
		SELECT -t.priority AS np, COALESCE(t.job_created_at, '-infinity') AS c, t.job_id FROM tasks t
		WHERE ` + fairRunnable("$1::text") + ` AND t.owner = a.owner
		ORDER BY t.kind, ` + fairOrder + ` LIMIT 1) f
	UNION ALL
	SELECT g.owner, g.lim, g.workload, g.n + 1, f.np, f.c, f.job_id FROM g CROSS JOIN LATERAL (
		SELECT -t.priority AS np, COALESCE(t.job_created_at, '-infinity') AS c, t.job_id FROM tasks t
		WHERE ` + fairRunnable("$1::text") + ` AND t.owner = g.owner
			AND (-t.priority, COALESCE(t.job_created_at, '-infinity'), t.job_id) > (g.np, g.c, g.job_id)
		ORDER BY t.kind, ` + fairOrder + ` LIMIT 1) f
	WHERE g.n < g.lim
)` + fairGroupsSelect(fairRunnable("$1::text")+` AND cardinality($4::text[]) = 0`),
		// $3 kind; see fairClaimSQL.
		claim: fairClaimSQL(`CROSS JOIN LATERAL (
		SELECT t.id, t.chunk_index FROM tasks t
		WHERE ` + fairRunnable("$3::text") + ` AND cardinality($4::text[]) = 0 AND t.owner = g.owner AND -t.priority = g.np
			AND COALESCE(t.job_created_at, '-infinity') = g.c AND t.job_id = g.job_id
		ORDER BY t.kind, ` + fairOrder + `, t.chunk_index
		LIMIT g.want
		FOR UPDATE SKIP LOCKED) x`),
	}
	fairWorkloads = fairSQL{
		// $1 kind, $2 workloads.
		accounts: `WITH RECURSIVE o(workload, owner) AS (
	SELECT w.workload, (SELECT t.owner FROM tasks t WHERE ` + fairRunnableWorkload("$1::text", "w.workload") + `
		ORDER BY t.kind, t.workload, t.owner LIMIT 1)
	FROM unnest($2::text[]) AS w(workload)
	UNION ALL
	SELECT o.workload, (SELECT t.owner FROM tasks t WHERE ` + fairRunnableWorkload("$1::text", "o.workload") + ` AND t.owner > o.owner
		ORDER BY t.kind, t.workload, t.owner LIMIT 1)
	FROM o WHERE o.owner IS NOT NULL
)` + fairAccountsSelect,
		// $1 kind, $2 owners, $3 their limits, $4 workloads, $5 the most
		// runnable tasks a group's count goes to.
		groups: `WITH RECURSIVE g(owner, lim, workload, n, np, c, job_id) AS (
	SELECT a.owner, a.lim, w.workload, 1, f.np, f.c, f.job_id
	FROM unnest($2::text[], $3::int[]) AS a(owner, lim) CROSS JOIN unnest($4::text[]) AS w(workload) CROSS JOIN LATERAL (
		SELECT -t.priority AS np, COALESCE(t.job_created_at, '-infinity') AS c, t.job_id FROM tasks t
		WHERE ` + fairRunnableWorkload("$1::text", "w.workload") + ` AND t.owner = a.owner
		ORDER BY t.kind, t.workload, ` + fairOrder + ` LIMIT 1) f
	UNION ALL
	SELECT g.owner, g.lim, g.workload, g.n + 1, f.np, f.c, f.job_id FROM g CROSS JOIN LATERAL (
		SELECT -t.priority AS np, COALESCE(t.job_created_at, '-infinity') AS c, t.job_id FROM tasks t
		WHERE ` + fairRunnableWorkload("$1::text", "g.workload") + ` AND t.owner = g.owner
			AND (-t.priority, COALESCE(t.job_created_at, '-infinity'), t.job_id) > (g.np, g.c, g.job_id)
		ORDER BY t.kind, t.workload, ` + fairOrder + ` LIMIT 1) f
	WHERE g.n < g.lim
)` + fairGroupsSelect(`t.state = 'pending' AND t.run_after IS NULL AND t.kind <> 'replica' AND t.kind = (SELECT $1::text) AND t.workload = ANY($4::text[])`),
		// $3 kind, $4 workloads; see fairClaimSQL.
		claim: fairClaimSQL(`CROSS JOIN unnest($4::text[]) AS w(workload) CROSS JOIN LATERAL (
		SELECT t.id, t.chunk_index FROM tasks t
		WHERE ` + fairRunnableWorkload("$3::text", "w.workload") + ` AND t.owner = g.owner AND -t.priority = g.np
			AND COALESCE(t.job_created_at, '-infinity') = g.c AND t.job_id = g.job_id
		ORDER BY t.kind, t.workload, ` + fairOrder + `, t.chunk_index
		LIMIT g.want
		FOR UPDATE SKIP LOCKED) x`),
	}
)

// fairAccountsSelect reads the accounts of the owners o found.
const fairAccountsSelect = `, owners AS (SELECT DISTINCT owner FROM o WHERE owner IS NOT NULL)
SELECT n.owner, COALESCE(a.weight, 1), COALESCE(a.max_running, 0), s.served_at
FROM owners n LEFT JOIN accounts a ON a.name = n.owner LEFT JOIN account_served s ON s.account = n.owner`

// fairGroupsSelect keeps each owner's first groups of those its walks g
// found (one walk per workload), each with its runnable tasks (of those
// where says) counted up to $5.
func fairGroupsSelect(where string) string {
	return `, d AS (SELECT DISTINCT owner, lim, np, c, job_id FROM g),
k AS (SELECT d.*, row_number() OVER (PARTITION BY owner ORDER BY np, c, job_id) AS k FROM d)
SELECT owner, -np, NULLIF(c, '-infinity'), job_id, (SELECT count(*) FROM (SELECT 1 FROM tasks t
	WHERE ` + where + ` AND t.owner = k.owner AND -t.priority = k.np AND COALESCE(t.job_created_at, '-infinity') = k.c AND t.job_id = k.job_id
	LIMIT $5) AS r)
FROM k WHERE k <= lim`
}

// sqlFairCounts counts leased tasks by account and job, in the order of
// tasks_leased, so that they are counted from it as they come.
const sqlFairCounts = `SELECT owner, job_id, count(*) FROM tasks
WHERE state = 'leased' AND kind <> 'stitch' GROUP BY owner, job_id ORDER BY owner, job_id`

// fairClaimSQL is the claim of slots: $1 the owners of the tasks in claim
// order, $2 now, $3 the kind, $4 the workloads, $5 how many tasks the
// claim leased before, and the slots in claim order as arrays of their
// account ($6), negated priority ($7), job creation (NULL for none, $8)
// and job ID ($9). candidates (a FROM item after the groups g, each with
// how many tasks it wants) takes up to that many runnable tasks of each
// group, in chunk order, locking them. The n-th task of a group goes to
// the group's n-th slot, and the slots filled, within the room an
// account's max_running leaves (counted here), are numbered again in
// claim order, the n-th leased to the n-th owner. With $10, the
// accounts given tasks are recorded as served, each at $2 plus, in
// microseconds, $5 and its last slot's place; a row another claim holds
// is passed over, since that claim records as late a time.
func fairClaimSQL(candidates string) string {
	return `WITH slots AS (
	SELECT s.i, s.owner, s.np, COALESCE(s.c, '-infinity') AS c, s.job_id,
		row_number() OVER (PARTITION BY s.owner, s.np, COALESCE(s.c, '-infinity'), s.job_id ORDER BY s.i) AS r
	FROM unnest($6::text[], $7::int[], $8::timestamptz[], $9::text[]) WITH ORDINALITY AS s(owner, np, c, job_id, i)
), g AS (
	SELECT owner, np, c, job_id, count(*) AS want FROM slots GROUP BY owner, np, c, job_id
), candidates AS (
	SELECT g.owner, g.np, g.c, g.job_id, x.id,
		row_number() OVER (PARTITION BY g.owner, g.np, g.c, g.job_id ORDER BY x.chunk_index, x.id) AS r
	FROM g ` + candidates + `
), placed AS (
	SELECT s.i, s.owner, c.id, row_number() OVER (PARTITION BY s.owner ORDER BY s.i) AS k
	FROM candidates c JOIN slots s ON s.owner = c.owner AND s.np = c.np AND s.c = c.c AND s.job_id = c.job_id AND s.r = c.r
), room AS MATERIALIZED (
	SELECT a.name, a.max_running - (SELECT count(*) FROM tasks l WHERE l.state = 'leased' AND l.kind <> 'stitch' AND l.owner = a.name) AS left
	FROM accounts a WHERE a.max_running > 0 AND a.name IN (SELECT owner FROM g)
), claimable AS (
	SELECT p.id AS claim_id, p.i, p.owner AS account, row_number() OVER (ORDER BY p.i) AS n
	FROM placed p LEFT JOIN room ON room.name = p.owner
	WHERE room.name IS NULL OR p.k <= room.left
), claimed AS (
UPDATE tasks
SET state = 'leased', lease_owner = ($1::text[])[claimable.n], attempt = attempt + 1,
	lease_expires_at = $2::timestamptz + LEAST(lease_seconds, NULLIF(timeout_seconds, 0)) * interval '1 second',
	attempt_deadline = $2::timestamptz + NULLIF(timeout_seconds, 0) * interval '1 second',
	run_after = NULL, updated_at = $2::timestamptz, leased_at = $2::timestamptz, version = version + 1
FROM claimable
WHERE id = claimable.claim_id
RETURNING ` + taskColumns + `
), running AS (
	UPDATE jobs SET status = 'running', updated_at = $2::timestamptz, version = version + 1
	WHERE id IN (SELECT job_id FROM claimed) AND status = 'pending'
), served AS (
	SELECT account, $2::timestamptz + ($5::int + max(i) - 1) * interval '1 microsecond' AS at FROM claimable WHERE $10::boolean GROUP BY account
), first_served AS (
	INSERT INTO account_served (account, served_at)
	SELECT account, at FROM served WHERE NOT EXISTS (SELECT 1 FROM account_served x WHERE x.account = served.account)
	ON CONFLICT DO NOTHING
), served_again AS (
	UPDATE account_served x SET served_at = served.at FROM served
	WHERE x.account = served.account AND x.served_at < served.at
		AND x.account IN (SELECT y.account FROM account_served y WHERE y.account IN (SELECT account FROM served) FOR UPDATE SKIP LOCKED)
)
SELECT ` + taskColumns + ` FROM claimed`
}

// sqlFairLock takes the advisory locks of the accounts of $1 in name
// order, until the transaction ends.
const sqlFairLock = `SELECT count(pg_advisory_xact_lock(hashtextextended('scimesh.max_running:' || name, 0)))
FROM (SELECT DISTINCT unnest($1::text[]) AS name ORDER BY name) AS l`

// fairOf is the statements of p's claim.
func fairOf(p *store.TaskClaimParams) *fairSQL {
	if len(p.Workloads) == 0 {
		return &fairAny
	}
	return &fairWorkloads
}

// TaskFairAccounts returns the accounts with runnable tasks of p's kind
// and workloads (store.FairClaimer).
func (q *querier) TaskFairAccounts(ctx context.Context, p *store.TaskClaimParams) ([]domain.FairAccount, error) {
	args := []any{string(p.Kinds[0])}
	if len(p.Workloads) > 0 {
		args = append(args, p.Workloads)
	}
	rows, err := q.db.Query(ctx, fairOf(p).accounts, args...)
	if err != nil {
		return nil, translate(err, "find the accounts with work")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.FairAccount, error) {
		var (
			a      domain.FairAccount
			served pgtype.Timestamptz
		)
		err := r.Scan(&a.Name, &a.Weight, &a.MaxRunning, &served)
		a.ServedAt = timeOf(served)
		return a, err
	})
	if err != nil {
		return nil, translate(err, "find the accounts with work")
	}
	return out, nil
}

// TaskFairCounts counts leased tasks by account and job
// (store.FairClaimer).
func (q *querier) TaskFairCounts(ctx context.Context) (*store.FairCounts, error) {
	rows, err := q.db.Query(ctx, sqlFairCounts)
	if err != nil {
		return nil, translate(err, "count the leased tasks of the accounts")
	}
	c := &store.FairCounts{Leased: map[string]int{}, JobLeased: map[store.FairJob]int{}}
	var (
		j store.FairJob
		n int
	)
	_, err = pgx.ForEachRow(rows, []any{&j.Account, &j.JobID, &n}, func() error {
		c.Leased[j.Account] += n
		c.JobLeased[j] = n
		return nil
	})
	if err != nil {
		return nil, translate(err, "count the leased tasks of the accounts")
	}
	return c, nil
}

// workloadsArg is p.Workloads as the statements take them: never NULL.
func workloadsArg(w []string) []string {
	if w == nil {
		return []string{}
	}
	return w
}

// TaskFairGroups returns the first groups of each account of limits
// (store.FairClaimer).
func (q *querier) TaskFairGroups(ctx context.Context, p *store.TaskClaimParams, limits map[string]int) (map[string][]domain.FairGroup, error) {
	owners := make([]string, 0, len(limits))
	lims := make([]int32, 0, len(limits))
	for o, l := range limits {
		owners = append(owners, o)
		lims = append(lims, int32(l))
	}
	args := []any{string(p.Kinds[0]), owners, lims, workloadsArg(p.Workloads), store.FairCountMax}
	rows, err := q.db.Query(ctx, fairOf(p).groups, args...)
	if err != nil {
		return nil, translate(err, "find the jobs with work of %d accounts", len(owners))
	}
	out := make(map[string][]domain.FairGroup, len(limits))
	var (
		owner   string
		g       domain.FairGroup
		created pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&owner, &g.Priority, &created, &g.JobID, &g.Max}, func() error {
		g.JobCreatedAt = timeOf(created)
		out[owner] = append(out[owner], g)
		return nil
	})
	if err != nil {
		return nil, translate(err, "find the jobs with work of %d accounts", len(owners))
	}
	for _, gs := range out { // rows come in no particular order
		slices.SortFunc(gs, domain.CompareFairGroups)
	}
	return out, nil
}

// TaskClaimSlots leases a task for each slot of p in turn
// (store.FairClaimer).
func (q *querier) TaskClaimSlots(ctx context.Context, p *store.TaskClaimSlotsParams) ([]*domain.Task, error) {
	n := len(p.Slots)
	accounts, jobs := make([]string, n), make([]string, n)
	priorities := make([]int32, n)
	created := make([]pgtype.Timestamptz, n)
	for i, s := range p.Slots {
		accounts[i], priorities[i], jobs[i] = s.Account, int32(-s.Priority), s.JobID
		created[i] = pgtype.Timestamptz{Time: s.JobCreatedAt, Valid: !s.JobCreatedAt.IsZero()}
	}
	args := []any{p.Owners, p.Now, string(p.Kinds[0]), workloadsArg(p.Workloads), p.Served, accounts, priorities, created, jobs, p.Stamp}
	claim := func(db dbtx) ([]*domain.Task, error) {
		rows, err := db.Query(ctx, fairOf(&p.TaskClaimParams).claim, args...)
		if err != nil {
			return nil, translate(err, "claim tasks for %s", p.Owners[0])
		}
		return collectTasks(rows, "claim tasks for %s", p.Owners[0])
	}
	if len(p.Limited) == 0 {
		return claim(q.db)
	}
	var out []*domain.Task
	err := q.inTx(ctx, func(tx dbtx) error {
		if _, err := tx.Exec(ctx, sqlFairLock, p.Limited); err != nil {
			return translate(err, "lock the accounts with a max_running")
		}
		var err error
		out, err = claim(tx)
		return err
	})
	return out, err
}

// inTx runs fn in q's transaction, or in one of its own on the pool.
func (q *querier) inTx(ctx context.Context, fn func(tx dbtx) error) error {
	if q.tx != nil {
		return fn(q.db)
	}
	tx, err := q.db.Begin(ctx)
	if err != nil {
		return translate(err, "begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return translate(err, "commit")
	}
	return nil
}
