package postgres_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// backlog returns n chunk tasks of job "big": one in every 100 pending, the
// others completed, as in a long queue that has mostly drained.
func backlog(n int) []*domain.Task {
	j := storetest.NewJob("big", storetest.Epoch())
	tasks := storetest.NewTasks(j, n)[1:]
	for i, tk := range tasks {
		if i%100 != 0 {
			tk.State = domain.TaskCompleted
			tk.Result = []byte("id,score\n1,0.5\n")
		}
	}
	return tasks
}

// explain returns the nodes of sql's plan under plan_cache_mode mode on
// conn, and the plan as indented JSON for messages.
func explain(t *testing.T, conn *pgx.Conn, mode, sql string, args ...any) ([]map[string]any, string) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = `+mode); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := conn.QueryRow(t.Context(), `EXPLAIN (FORMAT JSON) `+sql, args...).Scan(&plan); err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	b, _ := json.MarshalIndent(plan, "", " ")
	return planNodes(plan), string(b)
}

// planNodes flattens an EXPLAIN (FORMAT JSON) plan into its nodes.
func planNodes(plan []map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		out = append(out, n)
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	for _, p := range plan {
		walk(p["Plan"].(map[string]any))
	}
	return out
}

// TestClaimAtScale inserts a large backlog with one TaskInsert, then checks
// that the claim statement reads the partial claim index in order — no
// sequential scan, no sort — under both the custom and the generic plan,
// so a claim costs O(log n) whatever the backlog.
func TestClaimAtScale(t *testing.T) {
	t.Parallel()
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	ctx := t.Context()
	s, url := openURL(t)
	tasks := backlog(n)
	start := time.Now()
	if err := s.TaskInsert(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("TaskInsert of %d tasks: %v (%.0f tasks/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())

	// No ANALYZE here: TaskInsert must have refreshed the statistics, or
	// the planner may sort every pending task instead of using the index.
	conn := connect(t, url)
	now := storetest.Epoch().Add(time.Hour)
	owners := slices.Repeat([]string{"w"}, 10)
	anyWorkload := []any{owners, now, []string{"chunk"}, []string{}, 10}
	named := []any{owners, now, []string{"chunk"}, []string{"tanimoto", "rare"}, 10}
	oneNamed := []any{owners, now, []string{"chunk"}, []string{"tanimoto"}, 10}
	for _, c := range []struct {
		sql, index string
		args       []any
	}{
		{postgres.SQLTaskClaim, "tasks_claim", anyWorkload},
		{postgres.SQLTaskClaimLarge, "tasks_claim", anyWorkload},
		{postgres.SQLTaskClaimWorkloads, "tasks_claim_workload", named},
		{postgres.SQLTaskClaimKind, "tasks_claim", anyWorkload},
		{postgres.SQLTaskClaimKindWorkload, "tasks_claim_workload", oneNamed},
		{postgres.SQLTaskClaimStitch, "tasks_claim_stitch", anyWorkload},
		{postgres.SQLTaskMakeRunnable, "tasks_backoff", []any{now, 1000}},
	} {
		for _, mode := range []string{"auto", "force_custom_plan", "force_generic_plan"} {
			nodes, plan := explain(t, conn, mode, c.sql, c.args...)
			usesClaimIndex := false
			for _, node := range nodes {
				switch node["Node Type"] {
				case "Sort":
					// Only the candidates, at most LIMIT per kind and
					// workload, are sorted: never the backlog.
					if strings.HasPrefix(fmt.Sprint(node["Sort Key"]), "[c.priority DESC") {
						continue
					}
					fallthrough
				case "Seq Scan", "Bitmap Heap Scan":
					t.Errorf("%s: the claim plan has a %s node:\n%s", mode, node["Node Type"], plan)
				}
				if node["Index Name"] == c.index && (node["Node Type"] == "Index Scan" || node["Node Type"] == "Index Only Scan") {
					usesClaimIndex = true
				}
			}
			if !usesClaimIndex {
				t.Errorf("%s: the claim plan does not scan %s:\n%s", mode, c.index, plan)
			}
		}
	}

	// A claim is planned once per connection and size, not at every call:
	// after its first custom plans PostgreSQL keeps the generic one, which
	// costs no more. (With the LIMIT a parameter it planned every claim.)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = auto`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		rows, err := tx.Query(ctx, postgres.SQLTaskClaimKind, anyWorkload...)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("claim in a transaction: %v", err)
		}
	}
	var generic, custom int64
	if err := tx.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
		postgres.SQLTaskClaimKind).Scan(&generic, &custom); err != nil {
		t.Fatalf("the claim's plans: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if generic < 4 {
		t.Errorf("10 claims of one connection made %d generic and %d custom plans; want the generic plan kept after the first few", generic, custom)
	}

	start = time.Now()
	got, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: []domain.TaskKind{domain.KindChunk}, Now: now})
	if err != nil || len(got) != 10 {
		t.Fatalf("TaskClaim on the backlog = %d tasks, %v; want 10", len(got), err)
	}
	t.Logf("TaskClaim of 10 among %d tasks (%d pending): %v", n, n/100, time.Since(start).Round(time.Microsecond))
	for i, tk := range got {
		if tk.ChunkIndex%100 != 0 || tk.ChunkIndex >= 1000 {
			t.Errorf("claimed task %d has chunk index %d; want the first 10 pending (0, 100, …, 900)", i, tk.ChunkIndex)
		}
	}
}

// TestConcurrentClaimers has 32 claimers drain 2,000 tasks at once and
// checks, from the database afterwards, that every task was leased once, to
// the claimer that got it.
func TestConcurrentClaimers(t *testing.T) {
	t.Parallel()
	const (
		jobs      = 4
		perJob    = 500
		claimers  = 32
		wantTotal = jobs * perJob
	)
	ctx := t.Context()
	s, url := openURL(t, "pool_max_conns=40")
	for j := range jobs {
		job := storetest.NewJob(fmt.Sprintf("j%d", j), storetest.Epoch().Add(time.Duration(j)*time.Second))
		job.Priority = j % 2
		if err := s.TaskInsert(ctx, storetest.NewTasks(job, perJob)[1:]); err != nil {
			t.Fatal(err)
		}
	}
	now := storetest.Epoch().Add(time.Minute)
	got := make([][]string, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			<-start
			me := fmt.Sprintf("w%02d", c)
			for {
				tasks, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{me}, 1+c%4), Kinds: []domain.TaskKind{domain.KindChunk}, Now: now})
				if err != nil {
					errs[c] = err
					return
				}
				// An empty claim means every pending task left is locked by a
				// claim in flight, which will lease it.
				if len(tasks) == 0 {
					return
				}
				for _, tk := range tasks {
					got[c] = append(got[c], tk.ID)
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d claimers drained %d tasks in %v", claimers, wantTotal, time.Since(began).Round(time.Millisecond))
	for c, err := range errs {
		if err != nil {
			t.Errorf("claimer %d: %v", c, err)
		}
	}

	owner := map[string]string{}
	for c, ids := range got {
		me := fmt.Sprintf("w%02d", c)
		for _, id := range ids {
			if prev, ok := owner[id]; ok {
				t.Errorf("task %s was claimed by %s and %s", id, prev, me)
			}
			owner[id] = me
		}
	}
	if len(owner) != wantTotal {
		t.Errorf("claimers got %d tasks, want %d", len(owner), wantTotal)
	}

	conn := connect(t, url)
	rows, err := conn.Query(ctx, `SELECT id, state, lease_owner, attempt, version FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, State, Owner string
		Attempt          int
		Version          int64
	}
	stored, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != wantTotal {
		t.Fatalf("the database holds %d tasks, want %d", len(stored), wantTotal)
	}
	for _, r := range stored {
		if r.State != "leased" || r.Attempt != 1 || r.Version != 2 || r.Owner != owner[r.ID] {
			t.Errorf("task %s is stored %s, owner %q, attempt %d, version %d; want leased once to %q",
				r.ID, r.State, r.Owner, r.Attempt, r.Version, owner[r.ID])
		}
	}
}

// TestStatisticsAfterBatches checks that a job's tasks inserted in
// batches smaller than analyzeAfter (as engine.CreateBatch writes them)
// still refresh the planner's statistics once enough have come in.
func TestStatisticsAfterBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, url := openURL(t)
	conn := connect(t, url)
	tuples := func() float64 {
		var n float64
		if err := conn.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE relname = 'tasks'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tasks := backlog(15_000)
	for i := 0; i < len(tasks); i += 5_000 {
		if err := s.InTx(ctx, func(q store.Querier) error { return q.TaskInsert(ctx, tasks[i:i+5_000]) }); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if n := tuples(); n > 0 {
				t.Fatalf("statistics of %v tasks after one batch of 5,000; want none yet (this test needs a fresh table)", n)
			}
		}
	}
	if n := tuples(); n < 10_000 {
		t.Errorf("after three batches of 5,000 the planner counts %v tasks; want the statistics refreshed (≥ 10,000)", n)
	}
}

// TestJobTasksAtScale checks that every statement over one job's tasks
// reads tasks_job, under the custom and the generic plan, and never the
// whole table: with 10,000 tasks of one job among 200,000, a page of the
// job's tasks in chunk order merges the index's range of each state
// rather than sorting the job's tasks. (Retention's TaskListIDs, a LIMIT
// in no order, is left to the planner: a sequential scan that stops at
// the first rows it finds may well be cheaper.)
func TestJobTasksAtScale(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, url := openURL(t)
	tasks := backlog(10_000)
	other := storetest.NewJob("other", storetest.Epoch())
	tasks = append(tasks, storetest.NewTasks(other, 190_000)[1:]...)
	if err := s.TaskInsert(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	job := tasks[0].JobID
	conn := connect(t, url)
	now := storetest.Epoch().Add(time.Hour)
	for _, c := range []struct {
		name    string
		sql     string
		args    []any
		ordered bool // a page in chunk order, which no plan may sort
	}{
		{"TaskList", postgres.SQLTaskList, []any{job, "chunk", -1, 100}, true},
		{"TaskList, a later page", postgres.SQLTaskList, []any{job, "chunk", 5_000, 100}, true},
		{"TaskList of one state", postgres.SQLTaskListState, []any{job, "chunk", -1, 100, "completed"}, true},
		{"TaskResultList", postgres.SQLTaskResultList, []any{job, -1, 16}, true},
		{"TaskCountByJob", postgres.SQLTaskCountByJob, []any{[]string{job}}, false},
		{"TaskCountFinished", postgres.SQLTaskCountFinished, []any{job, now, int64(1000), 300}, false},
		{"TaskRetryJob", postgres.SQLTaskRetryJob, []any{job, 1, now}, false},
		{"TaskCancelJob", postgres.SQLTaskCancelJob, []any{job, job + "-stitch", now}, false},
		{"the deletion of an abandoned creation", postgres.SQLAbandonedTasksDelete, []any{job, 1000}, false},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			nodes, plan := explain(t, conn, mode, c.sql, c.args...)
			usesIndex := false
			for _, node := range nodes {
				// Under the generic plan, an unknown LIMIT may sort a
				// page's worth of each state.
				bad := node["Node Type"] == "Seq Scan" && node["Relation Name"] == "tasks" ||
					node["Node Type"] == "Sort" && c.ordered && mode == "force_custom_plan"
				if bad {
					t.Errorf("%s, %s: the plan has a %s node:\n%s", c.name, mode, node["Node Type"], plan)
				}
				if node["Index Name"] == "tasks_job" {
					usesIndex = true
				}
			}
			if !usesIndex {
				t.Errorf("%s, %s: the plan does not read tasks_job:\n%s", c.name, mode, plan)
			}
		}
	}
}
