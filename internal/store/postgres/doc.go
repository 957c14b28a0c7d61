// Package postgres implements the storage contract (package store) on
// PostgreSQL with pgx v5 and hand-written SQL. Row types stay inside the
// package; callers see domain.Job and domain.Task.
//
// Open connects but does not migrate: run `scimesh migrate up` or
// `scimesh serve --migrate`, which apply Migrations through MigrateDB, and
// call CheckMigrated to refuse to serve an out-of-date schema. Migrators
// exclude each other with an advisory lock, so several processes may migrate
// at once.
//
// Concurrency: transactions run at READ COMMITTED; the engine guards its
// writes with the row version. TaskClaim is one UPDATE over a
// FOR UPDATE SKIP LOCKED subquery on a partial index of pending tasks, so
// concurrent claimers lease different tasks without waiting on each other,
// at O(log n) cost whatever the backlog of other states. Kinds and
// workloads filter that index: a claim for a kind or workload that no task
// near the head of the queue has reads past the pending tasks ahead of its
// first match. Many inserted tasks (counted across TaskInserts, since a job
// comes in batches) refresh the planner's statistics (see analyzeAfter) so
// the claim keeps its index plan. Serialization failures and
// deadlocks come back as store.ErrStale, unique violations as
// store.ErrDuplicate and lost connections as store.ErrUnavailable; the
// original pgx error stays reachable with errors.As.
package postgres
