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
// Where each operation lives, one subject a file:
//
//	job.go         CreateJob, GetJob, ListJobs, CancelJob, RetryJob
//	upload.go      CreateUpload: a table streamed, checked and cut into chunks
//	claim.go       ClaimTasks: fair or FIFO claims, long polls, claims run together
//	renew.go       RenewLease: heartbeats, written together
//	complete.go    CompleteTask, CompleteTasks: results, checked and recorded
//	fail.go        FailTask: failures and releases; a job failed by its task
//	expire.go      Sweep, ExpireLeases, MakeRunnable: the reaper's work
//	lease.go       what those share: run sizes, leases given back
//	stitch.go      StitchReadyJobs: the final CSV, merged from the outputs
//	result.go      OpenJobResult: reading the final CSV
//	peek.go        PeekJobResult: the best rows of the chunks completed so far
//	columns.go     input columns joined to the final CSV, ids checked
//	cache.go       the chunk cache: keys, reuse at creation, hits at claims
//	backup.go      backups of straggling chunks (domain.Speculate)
//	vote.go        untrusted workers' claims and the votes on their outputs
//	ballot.go      a voted chunk's replicas, kept as ballots in its row
//	held.go        the leases this engine handed out, remembered
//	group.go       calls that arrive together, run as one transaction
//	tree.go        task trees; outbox.go, propagate.go across shards
//	logs.go        task logs; task.go reads of tasks; jobwait.go WaitJob
//	account.go, workerkey.go, keycache.go, session.go, owner.go, quota.go
//	               accounts, worker keys, sessions, ownership, quotas
//	usage.go, audit.go   accounting and the audit trail
//	retention.go   PruneExpired; loops.go Run, the background loops
//	worker.go      workers seen, for GET /workers and the cache's versions
//
// The tests of a file are in FILE_test.go (the fencing that renew, complete
// and fail share in lease_test.go; setup helpers in engine_test.go). The
// task and job state machines are drawn in ARCHITECTURE.md.
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
