package postgres

import "context"

// Setting is the value of the run-time parameter name on a connection of
// the store's pool.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// The claim statements, exposed to the tests, which EXPLAIN them: each
// as a claim of 10 tasks writes it, and the one of claims too large for
// a literal LIMIT.
var (
	SQLTaskClaim             = sqlTaskClaim.of(10)
	SQLTaskClaimWorkloads    = sqlTaskClaimWorkloads.of(10)
	SQLTaskClaimKind         = sqlTaskClaimKind.of(10)
	SQLTaskClaimKindWorkload = sqlTaskClaimKindWorkload.of(10)
	SQLTaskClaimStitch       = sqlTaskClaimStitch.of(10)
	SQLTaskClaimLarge        = sqlTaskClaim.of(2000)
	SQLTaskMakeRunnable      = sqlTaskMakeRunnable
)

// The statements over one job's tasks, which tasks_job serves.
var (
	SQLTaskList             = sqlTaskList
	SQLTaskListState        = sqlTaskListState
	SQLTaskResultList       = sqlTaskResultList
	SQLTaskCountByJob       = sqlTaskCountByJob
	SQLTaskCountFinished    = sqlTaskCountFinished
	SQLTaskRetryJob         = sqlTaskRetryJob
	SQLTaskCancelJob        = sqlTaskCancelJob
	SQLAbandonedTasksDelete = sqlAbandonedTasksDelete
)

// The statements of fair claims, which the tests EXPLAIN.
var (
	SQLFairAccounts          = fairAny.accounts
	SQLFairAccountsWorkloads = fairWorkloads.accounts
	SQLFairGroups            = fairAny.groups
	SQLFairGroupsWorkloads   = fairWorkloads.groups
	SQLFairClaim             = fairAny.claim
	SQLFairClaimWorkloads    = fairWorkloads.claim
	SQLFairCounts            = sqlFairCounts
)
