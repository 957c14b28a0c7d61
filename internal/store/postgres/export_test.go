package postgres

// SQLTaskClaim and SQLTaskClaimStitch expose the claim statements to the
// tests, which EXPLAIN them.
var (
	SQLTaskClaim       = sqlTaskClaim
	SQLTaskClaimStitch = sqlTaskClaimStitch
)
