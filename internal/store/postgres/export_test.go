package postgres

// SQLTaskClaim exposes the claim statement to the tests, which EXPLAIN it.
const SQLTaskClaim = sqlTaskClaim
