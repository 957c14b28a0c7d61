// Package engine carries out SciMesh's operations — create a job, claim,
// heartbeat, complete, fail, expire, cancel, stitch — on top of the storage
// contract, and runs the background loops that keep a coordinator moving
// (the lease reaper, the stitcher, the outbox, the worker pruner).
// Transports call the engine; the engine calls the store; the domain
// decides.
//
// Names: the engine's exported methods are Verb+Noun, as the standard
// library names operations (CreateJob, GetJob, ListJobs, CancelJob,
// ClaimTasks, RenewLease, CompleteTask, FailTask, ListLogs, FollowLogs,
// OpenJobResult, GetOutboxStats, PruneExpired), unlike the storage
// contract, whose methods are Noun+Verb so that a table's sort together
// (JobGet, TaskClaim). A read of one thing by its ID is Get, of a page or
// a set List, of a number Count, of a stream to read Open; a method that
// acts on many things of a kind takes the plural (CompleteTasks,
// ExpireLeases, StitchReadyJobs). A method's params struct is named after
// it (ClaimTasks takes ClaimTasksParams). Methods that read the engine's
// own settings take no verb (Shard), and those that run the engine itself
// take no noun (Run, Ping).
//
// The rules:
//
//   - Every operation is one transaction that reads the rows it needs,
//     decides with the domain's pure rules, and writes back guarded by the
//     rows' versions. A lost race (store.ErrStale) reruns the whole
//     transaction, which re-reads what it needs; an idempotent replay writes
//     nothing.
//   - A lease is fenced by (task, attempt, worker): a claim bumps the attempt,
//     and every worker write must name the attempt and worker of the live
//     lease. A lease is live while the task is leased, its expiry is in the
//     future and its attempt's deadline (the claim plus the job's
//     timeout_seconds, if any) is too; once expired it is lost even before
//     the reaper notices. A lease never outlives its deadline: the claim and
//     every heartbeat cap it there.
//   - Expired leases are swept by the reaper loop and just before claims.
//     An expired or retryably failed task returns to pending while attempts
//     remain (after a backoff with jitter for failures, timed-out attempts
//     included); otherwise it fails.
//   - The first task that fails for good fails its job, fails the stitch
//     root (the path to the root) and cancels every other task of the job,
//     in the same transaction.
//   - When a chunk completes, its downstream stitch task's count of pending
//     upstreams drops by one; at zero the stitch task becomes pending and a
//     coordinator's stitcher leases it like any task, merges the chunk
//     outputs and completes the job. The stitch lease is the coordinators'
//     own (Config.StitchLease), renewed while the merge runs; when it runs
//     out the stitch is pending again at once, never spending the job's
//     attempts, and only outputs that cannot be merged fail the job. The
//     outputs are read in pages, so a stitch holds one page and the best
//     top_k rows. Every loop is safe to run in several
//     processes sharing one database: they coordinate through leases and
//     version-guarded writes only.
//   - Task trees work the same way, their results handed to downstream
//     tasks as arguments (tree.go). Whatever concerns another shard's task
//     is an outbox message written in the same transaction as the local
//     change and delivered until that shard answers (outbox.go); every
//     receiving operation is idempotent (propagate.go), so each message
//     takes effect exactly once.
package engine
