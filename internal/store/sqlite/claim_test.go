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
		query *statement
		args  []any
		index string
	}{
		"claim of any workload":   {sqlTaskClaimCandidates, []any{"chunk", 10}, "tasks_claim"},
		"claim of a workload":     {sqlTaskClaimWorkloadCandidates, []any{"chunk", 10, "tanimoto"}, "tasks_claim_workload"},
		"claim of the candidates": {sqlTaskClaimRows, []any{`[[1,"w"],[2,"v"]]`, 1}, "sqlite_autoindex_tasks_1"},
		"backoff passed":          {sqlTaskMakeRunnable, []any{1, 10}, "tasks_backoff"},
		"stitch claim":            {sqlTaskClaimStitchCandidates, []any{1, 10}, "tasks_claim_stitch"},
	} {
		plan := queryPlan(t, s, c.query.query, c.args...) + "\n"
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
		query *statement
		args  []any
		index string
	}{
		{sqlTaskListExpired, []any{1, 10}, "tasks_lease_expiry"},
		{sqlTaskResultList, []any{"j1", -1, 16}, "tasks_job_kind_state"},
		{sqlTaskCountByJob, []any{"j1"}, "tasks_job_kind_state"},
		{sqlTaskList, []any{"j1", "chunk", -1, 10}, "tasks_job_kind_index"},
		{sqlTaskListState, []any{"j1", "chunk", -1, "pending", 10}, "tasks_job_kind_state"},
		{sqlTaskCancelJob, []any{1, "j1", ""}, "tasks_job_kind"},
		{sqlTaskListOpen, []any{"a", "[]", 10, 0, "[]", "[]"}, "tasks_claim_open"},
		{sqlTaskDecrementUpstreams, []any{1, 1, "t"}, "sqlite_autoindex_tasks_1"},
		{sqlTaskGet, []any{"t"}, "sqlite_autoindex_tasks_1"},
		{sqlTaskUpdate, make([]any, 19), "sqlite_autoindex_tasks_1"},
		{sqlTaskRetryJob, []any{1, 1, "j1"}, "tasks_job_kind"},
		{sqlTaskLogLast, []any{"t", 1}, "task_logs_seq"},
		{sqlJobList[jobListForm{}], []any{10}, "jobs_created"},
		{sqlJobList[jobListForm{after: true}], []any{1, "j", 10}, "jobs_created"},
		{sqlJobList[jobListForm{status: true}], []any{"pending", 10}, "jobs_status_created"},
		{sqlJobList[jobListForm{status: true, after: true}], []any{"pending", 1, "j", 10}, "jobs_status_created"},
		{sqlJobList[jobListForm{owner: true}], []any{"ada", 10}, "jobs_owner_created"},
		{sqlJobList[jobListForm{owner: true, after: true}], []any{"ada", 1, "j", 10}, "jobs_owner_created"},
		{sqlJobList[jobListForm{owner: true, status: true}], []any{"ada", "pending", 10}, "jobs_owner_status_created"},
		{sqlJobList[jobListForm{owner: true, status: true, after: true}], []any{"ada", "pending", 1, "j", 10}, "jobs_owner_status_created"},
		{sqlJobGetByIdempotencyKey, []any{"ada", "k"}, "jobs_idempotency_key"},
		{sqlJobMarkRunning, []any{1, `["j1"]`}, "sqlite_autoindex_jobs_1"},
		{sqlJobUpdate, make([]any, 8), "sqlite_autoindex_jobs_1"},
		{sqlTaskGetMany, []any{`["t1","t2"]`}, "sqlite_autoindex_tasks_1"},
	} {
		plan := queryPlan(t, s, c.query.query, c.args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("plan of %q does not use %s without sorting:\n%s", c.query.query, c.index, plan)
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
