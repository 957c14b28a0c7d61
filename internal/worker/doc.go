// Package worker is SciMesh's worker daemon (`scimesh worker`): it claims
// chunk tasks from a coordinator over the REST API, runs them, and reports
// each chunk's best rows. It never touches the database; everything goes
// through internal/client with the worker token.
//
// # Life cycle
//
// Run starts Concurrency slots. Each slot loops:
//
//  1. Claim one task, long-polling (wait_seconds, ClaimWait) and naming
//     the configured workloads only. No work, a network error or a 5xx
//     (or 429) answer: back off with jitter, doubling from MinBackoff to
//     MaxBackoff, and keep going. A refusal that waiting cannot fix (401,
//     403, 400, 404) shuts the worker down and Run returns it.
//  2. Heartbeat every third of what is left of the lease, measured from the
//     claim's lease_expires_at against the coordinator's Date header, so a
//     skewed local clock does not matter. An answer of lease_lost or
//     cancelled (or 404), or no heartbeat getting through before the lease
//     ends, abandons the attempt: the workload is killed and nothing is
//     reported, since the task is someone else's or its job is over.
//  3. Download input.url, hashing it on the way: for a command, into the
//     file .scimesh-input in its directory (below), checked before the
//     command starts; for a built-in, streamed to it as it arrives. On
//     the coordinator's own scheme and host it is fetched with the worker
//     token, always allowed. Anywhere else (a
//     job's input.chunks URIs) it is a hosted input: fetched without the
//     token, without an HTTP proxy, and only from where AllowInputHosts
//     (--allow-input-host) allows, checked on the address each connection
//     dials, redirects included (see hostPolicy); by default anywhere but
//     loopback and link-local addresses. An input may be MaxInputBytes
//     long: a task that names a larger size fails for good before anything
//     is downloaded, and one of unknown size is cut off past it. A download
//     that stalls for InputIdleTimeout is abandoned. A command starts only
//     on an input whose size and sha256 were checked; a built-in's result
//     (or permanent failure) is reported only then. A mismatch is a
//     retryable failure. A hosted input's failure gives the task's error a
//     plain reason only, the details going to the worker's log (see
//     hiddenError).
//  4. Run the workload. A command workload is the operator's string, run
//     as `/bin/sh -c COMMAND` under a supervisor (below), in the fresh
//     directory WORK_DIR/TASK_ID/ATTEMPT/ (removed afterwards unless
//     KeepWorkDirs), with the chunk's file on stdin (a regular file,
//     opened read-only, its name removed from the directory unless
//     KeepWorkDirs: the command reads it without waking the worker, and
//     may seek in it or map it) and the task in its
//     environment: SCIMESH_TASK_ID, SCIMESH_JOB_ID, SCIMESH_CHUNK_INDEX,
//     SCIMESH_ATTEMPT, SCIMESH_PARAMETERS (the job's parameters as compact
//     JSON), and for convenience SCIMESH_WORKLOAD, SCIMESH_WORKER_ID,
//     SCIMESH_HAS_HEADER (true or false), SCIMESH_TOP_K,
//     SCIMESH_SCORE_COLUMN and SCIMESH_ORDER. Of the worker's own
//     environment it sees PATH, HOME, LANG, LC_*, TZ and TMPDIR, and the
//     variables PassEnv (--pass-env) names; nothing else — no token, no
//     credential. Its stderr lines go to the task's log in
//     batches (every LogInterval or LogBatch lines; dropped quietly when
//     the coordinator has no log endpoint). When it exits, whatever it
//     left running is killed. A built-in workload (a name without a
//     command, such as tanimoto) runs in the worker's process. A task whose
//     timeout_seconds is set is stopped that long after its claim.
//  5. Keep the best top_k rows of the output (CSV with a header on stdout,
//     a pipe of 1 MiB on Linux read in pieces of up to 1 MiB, so that the
//     worker wakes seldom beside a busy command) by the job's score column
//     and order, ties to the earlier row, in a bounded heap as the output
//     streams in, and report them in that order. table.TopK does it,
//     checking the output by the rules the coordinator checks the result
//     by, so what it keeps is accepted, and holding at most one record of
//     64 MiB. Otherwise report a failure whose error says what happened.
//
// # Failures
//
// Retryable, so the task runs again while attempts remain: a non-zero exit
// or death by a signal (the error quotes the last stderr lines), an
// attempt that ran past its timeout_seconds (the error starts "timed out
// after N s"), input that does not download or does not match its sha256
// or size, and an output
// the worker cannot use — empty, no header naming the score column once,
// malformed CSV, or a score that is not a finite number. Output faults are
// retryable because they are the command's, which is the operator's
// configuration of this worker: another worker's command may do better,
// and max_attempts bounds the waste. Not retryable, failing the task and
// its job for good: an error of a built-in that wraps ErrPermanent (for
// tanimoto, a fingerprint of the wrong length or not in hex, naming the
// line), parameters that cannot be passed to a command (not JSON, or
// over the 128 KiB a Linux environment variable holds), a hosted input on
// a host the operator does not allow, and an input over MaxInputBytes.
// Each of those errors names the flag that changes it.
//
// A task is never run for a job's choice of command: the coordinator's
// task names a workload, and a worker runs only the command its operator
// configured for that name. A task of a workload this worker did not
// configure, were a coordinator to hand one out, fails as retryable without
// running anything.
//
// # Shutdown
//
// When Run's context is done (SIGTERM or SIGINT in the scimesh command),
// the worker stops claiming (an in-flight long poll is cut short), lets
// running tasks finish and report within Grace, then kills the rest and
// reports them with "release": the coordinator puts them back at once,
// without backoff and without holding the attempt against them, instead of
// after their lease expires. Run then returns nil. (Tree tasks killed at
// shutdown are reported as retryable failures: the Worker service has no
// release.)
//
// # Deadline
//
// A worker in a batch allocation (Slurm, PBS, a spot instance) has a
// Deadline. Each slot claims only while at least a lease is left before it
// — the length of the lease last granted, DefaultDeadlineLease (the
// shortest a job may ask) before the first — and long-polls no longer than
// that leaves. At the deadline the worker kills its running tasks at once
// and releases them, as at the end of a grace period, and Run returns nil;
// it returns as soon as no slot will claim again and nothing runs, too.
// Release (SIGUSR1 in the scimesh command) does the same at any moment,
// also during a shutdown's grace period. See deadline.go.
//
// # Processes
//
// On Linux a command's supervisor is the worker's own binary started again
// with a hidden first argument, which this package's init recognizes in
// any binary that links it (see supervise_linux.go). It is a child
// subreaper, so every process the command starts stays its descendant,
// and it kills all of them when the command exits, when the worker asks
// (cancel, lost lease, timeout, end of the grace period), or when the
// worker dies — even by SIGKILL: it learns that from the end of a pipe
// whose write end only the worker holds. Processes started for the
// command by something else (systemd-run, at, a container engine, ssh)
// are not its descendants and escape. On other Unix systems the command
// runs in a process group of its own, killed on cancel and at its end, but
// not when the worker dies, and processes that leave the group escape.
//
// # Directories
//
// Task IDs are SHARD:LOCAL of [A-Za-z0-9._:-]; the ':' is kept in directory
// names, which Linux and macOS allow. Any other byte becomes '_', and an ID
// of "." or ".." gets a leading '_', so that no ID can name a directory
// outside WORK_DIR.
//
// The work directory must be the worker's own: Run makes it (mode 0700)
// or refuses, before it claims anything, one another user owns or that
// its group or others may write (see workdir.go). On start, a worker
// alone in it removes the task directories that killed workers left
// there: every worker holds WORK_DIR/.scimesh-worker.lock shared while it
// runs (opened without following a link, and never waited for more than
// a few seconds), and sweeps only when it can take it exclusively. It
// removes real directories named as a task ID holding only numbered
// attempt directories, and nothing else; with KeepWorkDirs, nothing.
//
// On Linux, Run marks the worker's process not dumpable, so that the
// commands it runs, as its user, cannot read its environment or memory.
//
// Every goroutine the worker starts belongs to a slot or to Run and ends
// before Run returns.
package worker
