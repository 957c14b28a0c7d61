package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Fair-share claims (store.ClaimFair), in the claim's transaction on the
// writer, so that what they read is what they lease from. The accounts
// with runnable work, and an account's jobs, are found by skipping
// through tasks_fair (tasks_fair_workload for claims of named workloads)
// a key at a time, each skip one search of the index, in one recursive
// statement; leased tasks are counted from tasks_leased. state =
// 'pending', run_after IS NULL and kind <> 'replica' (and state =
// 'leased', kind <> 'stitch') must stay literals for SQLite to use the
// partial indexes.

// fairIndex is a claim's statements over tasks_fair (any workload, ?3
// unused) or tasks_fair_workload (?3 the workload).
type fairIndex struct {
	// owners are the owners with runnable tasks of kind ?1, with their
	// weight, max_running and when they were last served.
	owners *statement
	// groups are owner ?2's first ?4 groups (priority, job creation,
	// job ID) in claim order, each with its runnable tasks counted up to
	// ?5.
	groups *statement
	// tasks are up to ?7 runnable tasks of a group (?4 priority, ?5 job
	// creation, ?6 job ID), by chunk index.
	tasks *statement
}

// newFairIndex writes the statements of a fairIndex over index, whose
// leading columns are lead (kind, or kind and workload), where what
// narrows the claim to them.
func newFairIndex(index, lead, where string) *fairIndex {
	from := `FROM tasks INDEXED BY ` + index + ` WHERE state = 'pending' AND run_after IS NULL AND kind <> 'replica' AND ` + where
	group := `SELECT priority, job_created_at, job_id ` + from + ` AND owner = ?2`
	return &fairIndex{
		owners: newStatement(`WITH RECURSIVE o(owner) AS (
	SELECT (SELECT owner ` + from + ` ORDER BY ` + lead + `, owner LIMIT 1)
	UNION ALL
	SELECT (SELECT owner ` + from + ` AND owner > o.owner ORDER BY ` + lead + `, owner LIMIT 1) FROM o WHERE o.owner IS NOT NULL)
SELECT o.owner, coalesce(a.weight, 1), coalesce(a.max_running, 0), s.served_at
FROM o LEFT JOIN accounts a ON a.name = o.owner LEFT JOIN account_served s ON s.account = o.owner
WHERE o.owner IS NOT NULL`),
		// Each step is the next job of the same priority and creation
		// time, else the first of the next creation time of the priority,
		// else of the next priority: each a range of the index. A missing
		// creation time sorts first. A step's group is a JSON array,
		// since a subquery gives one value.
		groups: newStatement(`WITH RECURSIVE g(n, j) AS (
	SELECT 1, (SELECT json_array(priority, job_created_at, job_id) FROM (` + group + ` ORDER BY priority DESC, job_created_at, job_id LIMIT 1))
	UNION ALL
	SELECT n + 1, (SELECT json_array(priority, job_created_at, job_id) FROM (
		SELECT * FROM (` + group + ` AND priority = g.j ->> 0 AND job_created_at IS g.j ->> 1 AND job_id > g.j ->> 2 ORDER BY job_id LIMIT 1)
		UNION ALL SELECT * FROM (` + group + ` AND priority = g.j ->> 0 AND job_created_at > coalesce(g.j ->> 1, -9223372036854775808)
			ORDER BY job_created_at, job_id LIMIT 1)
		UNION ALL SELECT * FROM (` + group + ` AND priority < g.j ->> 0 ORDER BY priority DESC, job_created_at, job_id LIMIT 1)
		LIMIT 1))
	FROM g WHERE g.j IS NOT NULL AND g.n < ?4)
SELECT j ->> 0, j ->> 1, j ->> 2, (SELECT count(*) FROM (SELECT 1 ` + from + ` AND owner = ?2
	AND priority = g.j ->> 0 AND job_created_at IS g.j ->> 1 AND job_id = g.j ->> 2 LIMIT ?5))
FROM g WHERE j IS NOT NULL`),
		tasks: newStatement(`SELECT rowid, chunk_index ` + from + ` AND owner = ?2 AND priority = ?4 AND job_created_at IS ?5 AND job_id = ?6
	ORDER BY chunk_index LIMIT ?7`),
	}
}

var (
	fairAny      = newFairIndex("tasks_fair", "kind", "kind = ?1 AND ?3 IS NULL")
	fairWorkload = newFairIndex("tasks_fair_workload", "kind, workload", "kind = ?1 AND workload = ?3")

	// The leased tasks of each job of each owner.
	sqlFairLeased = newStatement(`SELECT owner, job_id, count(*) FROM tasks INDEXED BY tasks_leased
	WHERE state = 'leased' AND kind <> 'stitch' GROUP BY owner, job_id`)
	// What accounts ?1 (a JSON array) with a max_running have room for.
	sqlFairRoom = newStatement(`SELECT a.name, a.max_running - (SELECT count(*) FROM tasks INDEXED BY tasks_leased
		WHERE state = 'leased' AND kind <> 'stitch' AND owner = a.name)
	FROM accounts a WHERE a.name IN (SELECT value FROM json_each(?1)) AND a.max_running > 0`)
	// ?1 is a JSON array of [account, served_at] pairs. WHERE true tells
	// the parser that ON CONFLICT is the upsert's, not the join's.
	sqlFairServe = newStatement(`INSERT INTO account_served (account, served_at)
	SELECT value ->> 0, value ->> 1 FROM json_each(?1) WHERE true
	ON CONFLICT (account) DO UPDATE SET served_at = max(served_at, excluded.served_at)`)
)

// fairStreams are the index walks of a claim: one over tasks_fair for a
// claim of any workload, else one per workload over tasks_fair_workload;
// each with the workload argument (?3) its statements take.
func fairStreams(p *store.TaskClaimParams) ([]*fairIndex, []any) {
	if len(p.Workloads) == 0 {
		return []*fairIndex{fairAny}, []any{nil}
	}
	idx := make([]*fairIndex, len(p.Workloads))
	args := make([]any, len(p.Workloads))
	for i, w := range p.Workloads {
		idx[i], args[i] = fairWorkload, w
	}
	return idx, args
}

// TaskFairAccounts returns the accounts with runnable tasks of p's kind
// and workloads (store.FairClaimer).
func (q *querier) TaskFairAccounts(ctx context.Context, p *store.TaskClaimParams) ([]domain.FairAccount, error) {
	kind := string(p.Kinds[0])
	var out []domain.FairAccount
	seen := map[string]bool{}
	idx, wl := fairStreams(p)
	for i, x := range idx {
		err := q.query(ctx, true, func(r scanner) error {
			var (
				a      domain.FairAccount
				served sql.NullInt64
			)
			if err := r.Scan(&a.Name, &a.Weight, &a.MaxRunning, &served); err != nil {
				return err
			}
			a.ServedAt = timeOf(served)
			if !seen[a.Name] {
				seen[a.Name] = true
				out = append(out, a)
			}
			return nil
		}, x.owners, kind, nil, wl[i])
		if err != nil {
			return nil, translate(err, "find the accounts with work")
		}
	}
	return out, nil
}

// TaskFairCounts counts leased tasks by account and job
// (store.FairClaimer).
func (q *querier) TaskFairCounts(ctx context.Context) (*store.FairCounts, error) {
	c := &store.FairCounts{Leased: map[string]int{}, JobLeased: map[store.FairJob]int{}}
	err := q.query(ctx, true, func(r scanner) error {
		var (
			j store.FairJob
			n int
		)
		err := r.Scan(&j.Account, &j.JobID, &n)
		c.Leased[j.Account] += n
		c.JobLeased[j] = n
		return err
	}, sqlFairLeased)
	if err != nil {
		return nil, translate(err, "count the leased tasks of the accounts")
	}
	return c, nil
}

// TaskFairGroups returns the first groups of each account of limits
// (store.FairClaimer). With several workloads, each workload's walk reads
// up to the limit and the first groups of them all are kept.
func (q *querier) TaskFairGroups(ctx context.Context, p *store.TaskClaimParams, limits map[string]int) (map[string][]domain.FairGroup, error) {
	kind := string(p.Kinds[0])
	idx, wl := fairStreams(p)
	out := make(map[string][]domain.FairGroup, len(limits))
	for owner, limit := range limits {
		var groups []domain.FairGroup
		for i, x := range idx {
			err := q.query(ctx, true, func(r scanner) error {
				var (
					g       domain.FairGroup
					created sql.NullInt64
				)
				if err := r.Scan(&g.Priority, &created, &g.JobID, &g.Max); err != nil {
					return err
				}
				g.JobCreatedAt = timeOf(created)
				groups = append(groups, g)
				return nil
			}, x.groups, kind, owner, wl[i], limit, store.FairCountMax)
			if err != nil {
				return nil, translate(err, "find the jobs of account %s with work", owner)
			}
		}
		if len(idx) > 1 {
			// A group of several workloads (a tree's) has them all.
			slices.SortFunc(groups, domain.CompareFairGroups)
			merged := groups[:0]
			for _, g := range groups {
				if n := len(merged); n > 0 && domain.CompareFairGroups(merged[n-1], g) == 0 {
					merged[n-1].Max += g.Max
					continue
				}
				merged = append(merged, g)
			}
			groups = merged[:min(len(merged), limit)]
		}
		out[owner] = groups
	}
	return out, nil
}

// TaskClaimSlots leases a task for each slot of p in turn
// (store.FairClaimer).
func (q *querier) TaskClaimSlots(ctx context.Context, p *store.TaskClaimSlotsParams) ([]*domain.Task, error) {
	kind := string(p.Kinds[0])
	idx, wl := fairStreams(&p.TaskClaimParams)
	// What an account with a max_running still has room for, counted
	// now, in the claim's transaction.
	room := map[string]int{}
	if len(p.Limited) > 0 {
		if err := q.query(ctx, true, func(r scanner) error {
			var (
				name string
				left int
			)
			err := r.Scan(&name, &left)
			room[name] = max(left, 0)
			return err
		}, sqlFairRoom, jsonArray(p.Limited)); err != nil {
			return nil, translate(err, "count the leased tasks of the accounts with a max_running")
		}
	}
	// Each group's runnable tasks, as many as it has slots, by chunk
	// index over the claim's workloads.
	want := map[slotKey]int{}
	for _, s := range p.Slots {
		want[keyOf(s)]++
	}
	rows := make(map[slotKey][]int64, len(want))
	for _, s := range p.Slots {
		k := keyOf(s)
		n := want[k]
		if _, done := rows[k]; done {
			continue
		}
		rows[k] = nil
		var cands []fairCandidate
		for i, x := range idx {
			err := q.query(ctx, true, func(r scanner) error {
				var c fairCandidate
				if err := r.Scan(&c.rowid, &c.chunkIndex); err != nil {
					return err
				}
				cands = append(cands, c)
				return nil
			}, x.tasks, kind, s.Account, wl[i], s.Priority, timeArg(s.JobCreatedAt), s.JobID, n)
			if err != nil {
				return nil, translate(err, "find the runnable tasks of job %s", s.JobID)
			}
		}
		if len(idx) > 1 {
			slices.SortFunc(cands, func(a, b fairCandidate) int { return int(a.chunkIndex - b.chunkIndex) })
		}
		for _, c := range cands[:min(len(cands), n)] {
			rows[k] = append(rows[k], c.rowid)
		}
	}
	var (
		pairs  [][2]any
		served = map[string]int64{}
	)
	for i, s := range p.Slots {
		k := keyOf(s)
		r := rows[k]
		if len(r) == 0 {
			continue
		}
		if left, ok := room[s.Account]; ok {
			if left == 0 {
				continue
			}
			room[s.Account] = left - 1
		}
		rows[k] = r[1:]
		pairs = append(pairs, [2]any{r[0], p.Owners[len(pairs)]})
		served[s.Account] = servedAtMicros(p, i)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(pairs) // integers and strings always encode
	out, err := q.tasks(ctx, true, sqlTaskClaimRows, string(b), p.Now.UnixMicro())
	if err != nil {
		return nil, translate(err, "claim tasks for %s", p.Owners[0])
	}
	if p.Stamp {
		stamps := make([][2]any, 0, len(served))
		for name, at := range served {
			stamps = append(stamps, [2]any{name, at})
		}
		b, _ = json.Marshal(stamps)
		if _, err := q.exec(ctx, sqlFairServe, string(b)); err != nil {
			return nil, translate(err, "record the accounts served")
		}
	}
	if err := q.markRunning(ctx, out, p.Now); err != nil {
		return nil, translate(err, "claim tasks for %s", p.Owners[0])
	}
	return out, nil
}

// servedAtMicros is when slot i of p serves its account, as stored:
// p.Now plus p.Served + i microseconds (store.ClaimFair's servedAt).
func servedAtMicros(p *store.TaskClaimSlotsParams, i int) int64 {
	return p.Now.UnixMicro() + int64(p.Served+i)
}

// slotKey is a slot's group, comparable.
type slotKey struct {
	account  string
	priority int
	created  int64 // microseconds; 0 for none
	job      string
}

func keyOf(s store.FairSlot) slotKey {
	k := slotKey{account: s.Account, priority: s.Priority, job: s.JobID}
	if !s.JobCreatedAt.IsZero() {
		k.created = s.JobCreatedAt.UnixMicro()
	}
	return k
}

// fairCandidate is a runnable task of a group.
type fairCandidate struct {
	rowid, chunkIndex int64
}
