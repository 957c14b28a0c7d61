package sqlite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/store/storetest"
)

// TestClaimUsesPartialIndex checks that the claim walks tasks_claim in order:
// no full scan, no sort in a temporary b-tree, whatever the backlog.
func TestClaimUsesPartialIndex(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	for i := range 20 {
		j := storetest.NewJob(fmt.Sprintf("j%d", i), storetest.Epoch())
		if err := s.TaskInsert(ctx, storetest.NewTasks(j, 50)); err != nil {
			t.Fatalf("TaskInsert: %v", err)
		}
	}
	for name, c := range map[string]struct {
		query string
		args  []any
		index string
	}{
		"claim of any workload":   {taskClaimCandidatesSQL, []any{"chunk", 10}, "tasks_claim"},
		"claim of a workload":     {taskClaimWorkloadCandidatesSQL, []any{"chunk", 10, "tanimoto"}, "tasks_claim_workload"},
		"claim of the candidates": {taskClaimRowsSQL, []any{"w", 1, "[1,2]"}, "sqlite_autoindex_tasks_1"},
		"backoff passed":          {taskRunnableSQL, []any{1, 10}, "tasks_backoff"},
		"stitch claim":            {taskClaimStitchSQL, []any{"w", 1, 10}, "tasks_claim_stitch"},
	} {
		plan := queryPlan(t, s, c.query, c.args...) + "\n"
		uses := false
		for _, end := range []string{" (", "\n"} {
			uses = uses || strings.Contains(plan, "USING COVERING INDEX "+c.index+end) || strings.Contains(plan, "USING INDEX "+c.index+end)
		}
		if !uses && !strings.Contains(plan, "USING INTEGER PRIMARY KEY") {
			t.Errorf("%s plan does not use %s:\n%s", name, c.index, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") || strings.Contains(plan, "SCAN tasks\n") {
			t.Errorf("%s plan sorts or scans the table:\n%s", name, plan)
		}
	}
	// The other hot queries use their indexes too.
	for _, c := range []struct {
		query string
		args  []any
		index string
	}{
		{taskListExpiredSQL, []any{1, 10}, "tasks_lease_expiry"},
		{taskResultListSQL, []any{"j1", -1, 16}, "tasks_job_kind_state"},
		{taskCountByJobSQL, []any{"j1"}, "tasks_job_kind_state"},
		{taskListSQLs[0], []any{"j1", "chunk", -1, 10}, "tasks_job_kind_index"},
		{taskListSQLs[1], []any{"j1", "chunk", -1, "pending", 10}, "tasks_job_kind_state"},
		{taskCancelJobSQL, []any{1, "j1", ""}, "tasks_job_kind"},
		{taskDecrementUpstreamsSQL, []any{1, 1, "t"}, "sqlite_autoindex_tasks_1"},
		{taskGetSQL, []any{"t"}, "sqlite_autoindex_tasks_1"},
		{taskUpdateSQL, make([]any, 14), "sqlite_autoindex_tasks_1"},
		{taskRetryJobSQL, []any{1, 1, "j1"}, "tasks_job_kind"},
		{taskLogLastSQL, []any{"t", 1}, "task_logs_seq"},
		{jobListSQLs[0][0], []any{10}, "jobs_created"},
		{jobListSQLs[0][1], []any{1, "j", 10}, "jobs_created"},
		{jobListSQLs[1][0], []any{"pending", 10}, "jobs_status_created"},
		{jobListSQLs[1][1], []any{"pending", 1, "j", 10}, "jobs_status_created"},
		{jobByKeySQL, []any{"k"}, "jobs_idempotency_key"},
		{jobMarkRunningSQL, []any{1, `["j1"]`}, "sqlite_autoindex_jobs_1"},
		{jobUpdateSQL, make([]any, 8), "sqlite_autoindex_jobs_1"},
	} {
		plan := queryPlan(t, s, c.query, c.args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("plan of %q does not use %s without sorting:\n%s", c.query, c.index, plan)
		}
	}
}

func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.writer.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", query, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatalf("read plan: %v", err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read plan: %v", err)
	}
	return b.String()
}
