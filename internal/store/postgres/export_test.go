package postgres

// The claim statements, exposed to the tests, which EXPLAIN them.
var (
	SQLTaskClaim          = sqlTaskClaim
	SQLTaskClaimWorkloads = sqlTaskClaimWorkloads
	SQLTaskClaimStitch    = sqlTaskClaimStitch
	SQLTaskMakeRunnable   = sqlTaskMakeRunnable
)
