// Package store is the storage contract of SciMesh: one interface that each
// database implements (sqlite, postgres), its parameters and its sentinel
// errors. The conformance suite in storetest runs against every
// implementation; extend the suite whenever the contract changes.
//
// Methods are named Entity+Verb, the entity first so that a table's
// methods sort together: JobGet, JobList, TaskClaim, TaskCountByJob,
// OutboxGetStats. The verbs are those of rows (Get one by its key, List
// several, Insert, Update, Upsert, Delete, Count, Claim) and a few of the
// domain's (MarkRunning, Cancel, Retry, DecrementUpstreams, Resolve,
// Append, Touch). A method that needs more than one argument after ctx
// takes them in a params struct named after it (JobList takes
// *JobListParams, TaskCancelJob *TaskCancelJobParams); a lookup by one
// key, or a call with one argument, takes it as it is.
//
// The contract is deliberately dumb: it reads and writes rows. The rules that
// decide what to write live in the domain and the engine, which read a row
// inside a transaction, decide, and write it back guarded by its version.
package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Sentinel errors every implementation translates its database's errors into.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrStale: the transaction lost a race — a version-guarded write found
	// the row changed, or the database aborted it (serialization failure,
	// deadlock). Rerun the whole transaction; never retry one statement.
	ErrStale = errors.New("store: stale; rerun the transaction")
	// ErrDuplicate: an insert collided with a unique key (a job ID or an
	// idempotency key already taken).
	ErrDuplicate = errors.New("store: duplicate key")
	// ErrUnavailable: the database does not answer or is busy.
	ErrUnavailable = errors.New("store: database unavailable")
)

// Store is a database that holds SciMesh's jobs and tasks.
type Store interface {
	Querier

	// InTx runs fn in one transaction and commits it when fn returns nil.
	// It runs fn once: callers rerun on ErrStale. Errors the database
	// raises for lost races come back as ErrStale.
	InTx(ctx context.Context, fn func(q Querier) error) error

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error

	// Close releases the database's connections.
	Close() error
}

// Querier reads and writes rows, inside a transaction (from InTx) or outside
// one (the Store itself, where each call stands alone).
//
// Times go in and come out in UTC with microsecond precision; a zero
// time.Time is stored as NULL and read back as zero. Every write sets the
// row's version to version+1 and reflects it in the struct passed in.
type Querier interface {
	RetentionQuerier
	AccountingQuerier
	CacheQuerier

	// JobInsert inserts j and sets j.ResultBytes to the length of its
	// Result (ResultBytes is never written: the store derives it). A taken
	// ID or idempotency key is ErrDuplicate.
	JobInsert(ctx context.Context, j *domain.Job) error
	// JobGet returns the job with id, creating or not, or ErrNotFound. It
	// leaves Result nil (only JobResultRead reads the final CSV) and sets
	// ResultBytes, the CSV's size, which the database knows without
	// reading the value.
	JobGet(ctx context.Context, id string) (*domain.Job, error)
	// JobGetByIdempotencyKey returns the job account owner created with
	// key, creating or not, or ErrNotFound. It leaves Result nil and sets
	// ResultBytes.
	JobGetByIdempotencyKey(ctx context.Context, owner, key string) (*domain.Job, error)
	// JobList returns jobs newest first (CreatedAt, then ID, descending),
	// leaving out those still creating. It leaves Result nil and sets
	// ResultBytes.
	JobList(ctx context.Context, p *JobListParams) ([]*domain.Job, error)
	// JobResultRead returns at most p.Limit bytes of the final CSV of job
	// p.ID from byte p.Offset on: fewer at its end, none past it or before
	// the job is stitched; ErrNotFound when there is no such job. It is the
	// one method that reads the CSV, so that a download holds a piece of
	// it at a time, never the whole (the job's ResultBytes says where it
	// ends). A negative Offset or Limit is an error.
	JobResultRead(ctx context.Context, p *JobResultReadParams) ([]byte, error)
	// JobUpdate writes j's mutable fields (Status, Error, ResultSHA256,
	// UpdatedAt, FinishedAt, and Result when it is not nil: a nil Result
	// keeps the stored one) where the stored version equals j.Version;
	// otherwise ErrStale (ErrNotFound when the job is gone). A Result
	// written sets j.ResultBytes to its length, as JobInsert does.
	JobUpdate(ctx context.Context, j *domain.Job) error
	// JobUpdateCreation records that the creation of job p.ID went on at
	// p.Now (UpdatedAt); with p.Done the job is whole and no longer
	// Creating. A job that is gone, not creating or abandoned (see
	// JobDeleteAbandoned) is ErrNotFound: its creation must stop.
	JobUpdateCreation(ctx context.Context, p *JobUpdateCreationParams) error
	// JobListAbandoned returns up to p.Limit jobs still creating whose
	// creation has not progressed since p.Before (UpdatedAt earlier) or
	// that were abandoned already, oldest UpdatedAt first.
	JobListAbandoned(ctx context.Context, p *JobListAbandonedParams) ([]*domain.Job, error)
	// JobDeleteAbandoned removes a job whose creation died, in bounded
	// steps: when job p.ID is creating and has not progressed since
	// p.Before (or was abandoned already), it marks it abandoned (status
	// cancelled, so that JobUpdateCreation refuses its creation), deletes
	// up to p.Limit of its tasks with their logs and, when none is left,
	// the job. It reports whether the job is gone. Any other job is
	// ErrNotFound and is kept.
	JobDeleteAbandoned(ctx context.Context, p *JobDeleteAbandonedParams) (gone bool, err error)
	// JobListMarkers returns the JobMarker of each listed job that exists
	// and is not creating, by job ID, in one statement; the others are
	// absent. It reads the job's row and its root task's by their keys,
	// whatever the number of the job's tasks: a long-polling reader asks
	// it several times a second, and counts tasks only once it changed.
	JobListMarkers(ctx context.Context, ids []string) (map[string]JobMarker, error)

	// TaskInsert inserts tasks, all or none. A taken ID is ErrDuplicate.
	TaskInsert(ctx context.Context, tasks []*domain.Task) error
	// TaskGet returns the task with id, or ErrNotFound.
	TaskGet(ctx context.Context, id string) (*domain.Task, error)
	// TaskList returns a job's tasks of one kind by ChunkIndex ascending,
	// with Result nil: a list never reads chunk outputs.
	TaskList(ctx context.Context, p *TaskListParams) ([]*domain.Task, error)
	// TaskUpdate writes t's mutable fields (State, Attempt, MaxAttempts,
	// LeaseOwner, LeaseExpiresAt, AttemptDeadline, LeasedAt, RunAfter,
	// Metrics, Error, PendingUpstreams, UpdatedAt, FinishedAt, and Result
	// when it is not nil: a nil Result keeps the stored one) where the
	// stored version equals t.Version; otherwise ErrStale (ErrNotFound
	// when the task is gone). A lease made in the engine (domain.Lease)
	// is written so; TaskClaim sets AttemptDeadline and LeasedAt itself.
	//
	// TaskInsert and TaskUpdate store a RunAfter at or before the task's
	// UpdatedAt (runnable at once) as none: it comes back zero, and the
	// struct passed in is set so. Only tasks in backoff keep one, outside
	// the claim indexes, until TaskMakeRunnable finds it passed.
	TaskUpdate(ctx context.Context, t *domain.Task) error
	// TaskLockMany returns the tasks of ids that exist, in any order, as
	// TaskGetMany does, and inside a transaction keeps every other
	// transaction's TaskLockMany and write of them waiting until this one
	// ends: what is decided from the rows read after it holds until then.
	// It takes the locks in ID order, so two transactions that lock
	// overlapping sets never wait for each other in a circle.
	TaskLockMany(ctx context.Context, ids []string) ([]*domain.Task, error)
	// TaskLockVersions locks the tasks of ids that exist as TaskLockMany
	// does and returns their versions by ID: a caller that remembers a
	// task as written at its version reads nothing more of it.
	TaskLockVersions(ctx context.Context, ids []string) (map[string]int64, error)
	// TaskGetMany returns the tasks of ids that exist, in any order, in
	// one statement; an ID asked for twice is returned once.
	TaskGetMany(ctx context.Context, ids []string) ([]*domain.Task, error)
	// TaskUpdateMany is TaskUpdate of each of tasks, sent together (one
	// round trip where the database allows). When any is stale it is
	// ErrStale (ErrNotFound when one is gone) and the caller's transaction
	// must be rerun: the others may have been written in it.
	TaskUpdateMany(ctx context.Context, tasks []*domain.Task) error
	// TaskClaim leases up to len(p.Owners) claimable tasks in one
	// statement and returns them leased, in any order; the i-th in claim
	// order goes to p.Owners[i] (a batch claim names its owner as often as
	// it wants tasks; concurrent single claims served together name one
	// owner each, so the first in line gets the first task). Claimable:
	// state pending, no RunAfter (stitch tasks: RunAfter <= p.Now; others
	// in backoff wait for TaskMakeRunnable), kind in p.Kinds, workload in
	// p.Workloads (any when empty). Chosen by priority descending, then
	// JobCreatedAt, then JobID, then ChunkIndex ascending; with p.Fair, in
	// fair-share order instead (ClaimFair). Each claimed task gets State
	// leased, its LeaseOwner, Attempt+1, UpdatedAt and LeasedAt p.Now and,
	// with a TimeoutSeconds above 0, AttemptDeadline p.Now + its
	// TimeoutSeconds (else zero); LeaseExpiresAt is p.Now + its
	// LeaseSeconds, or the AttemptDeadline when that is earlier. The jobs
	// of the claimed tasks that are pending become running at p.Now, in
	// the same statement. Concurrent claims never return the same task.
	TaskClaim(ctx context.Context, p *TaskClaimParams) ([]*domain.Task, error)
	// TaskMakeRunnable clears the RunAfter of up to p.Limit pending tasks
	// whose RunAfter is at or before p.Now, soonest first, so that claims
	// find them, and returns how many it cleared. Rows a concurrent
	// transaction holds are left to a later call.
	TaskMakeRunnable(ctx context.Context, p *TaskMakeRunnableParams) (int, error)
	// TaskListExpired returns the leased tasks whose lease expired at or
	// before p.Now, oldest expiry first, at most p.Limit of them (all when
	// p.Limit is 0 or less), with Result nil.
	TaskListExpired(ctx context.Context, p *TaskListExpiredParams) ([]*domain.Task, error)
	// TaskCancelJob moves every task of job p.JobID that is waiting,
	// pending or leased to cancelled at p.Now, with no lease expiry
	// (LeaseOwner stays), except the one with ID p.Except (may be empty),
	// and returns how many it moved.
	TaskCancelJob(ctx context.Context, p *TaskCancelJobParams) (int, error)
	// TaskRetryJob puts every chunk task of job p.JobID that is failed or
	// cancelled back to pending at p.Now, runnable at once, with a fresh
	// budget: MaxAttempts becomes Attempt + p.MaxAttempts. It clears their
	// lease expiry and finish time; Attempt (the fencing token), LeaseOwner
	// and Error stay. It returns how many it moved.
	TaskRetryJob(ctx context.Context, p *TaskRetryJobParams) (int, error)
	// TaskDecrementUpstreams records that p.N upstreams of task p.ID
	// completed at p.Now: PendingUpstreams -= p.N, and a waiting task whose
	// PendingUpstreams reaches 0 becomes pending. It returns the task as
	// written, or ErrNotFound.
	TaskDecrementUpstreams(ctx context.Context, p *TaskDecrementUpstreamsParams) (*domain.Task, error)
	// TaskResultList returns a page of the outputs of a job's completed
	// chunk tasks, by ChunkIndex ascending: those whose ChunkIndex is above
	// p.AfterIndex, at most p.Limit of them (all when 0 or less). The
	// stitcher reads a job's outputs page by page, so that what it holds
	// does not grow with the number of chunks.
	TaskResultList(ctx context.Context, p *TaskResultListParams) ([]ChunkResult, error)
	// TaskCountFinished counts a job's completed chunk tasks by when they
	// finished: element i of the p.Buckets elements counts those that
	// finished in [p.Start + i·p.Width, p.Start + (i+1)·p.Width), except
	// that earlier ones count in the first and later ones in the last.
	TaskCountFinished(ctx context.Context, p *TaskCountFinishedParams) ([]int, error)
	// TaskCountByJob counts the tasks of kind chunk of each listed job by
	// state, in one go; a job without tasks (or no such job) is absent.
	TaskCountByJob(ctx context.Context, jobIDs []string) (map[string]domain.TaskCounts, error)
	// TaskCountByState counts every task by kind and state; kinds and
	// states without a task are left out.
	TaskCountByState(ctx context.Context) ([]TaskCount, error)
	// TaskListRoots returns up to limit roots of general trees on this
	// database (tasks of kind tree whose ID is their JobID) that owner owns
	// (empty: anyone), newest first (CreatedAt, then ID, descending).
	TaskListRoots(ctx context.Context, owner string, limit int) ([]*domain.Task, error)

	// WorkerUpsert records that worker p.ID called at p.Now, creating it when
	// new; with p.Heartbeat the call renewed a lease; with p.Announced it
	// named p.Workloads, which replace those recorded unless an older call
	// is recorded late.
	WorkerUpsert(ctx context.Context, p *WorkerUpsertParams) error
	// WorkerAddDone adds to the tasks each worker completed (worker ID →
	// tasks), creating a worker first seen at now when it is unknown.
	// Inside a transaction it takes the workers' rows in ID order, so
	// that two such transactions queue rather than deadlock.
	WorkerAddDone(ctx context.Context, done map[string]int64, now time.Time) error
	// WorkerList returns up to p.Limit workers (all when 0 or less) seen
	// at or after p.Since, most recently seen first (then by ID).
	WorkerList(ctx context.Context, p *WorkerListParams) ([]*Worker, error)
	// WorkerPage returns up to p.Limit workers (all when 0 or less) seen
	// at or after p.Since whose ID starts with p.Prefix (any when ""),
	// in WorkerList's order, after p.After when it is set.
	WorkerPage(ctx context.Context, p *WorkerPageParams) ([]*Worker, error)
	// WorkerDelete deletes the workers last seen before before and returns
	// how many it deleted.
	WorkerDelete(ctx context.Context, before time.Time) (int, error)

	// AccountInsert records a new account; an account of that name
	// already there is ErrDuplicate.
	AccountInsert(ctx context.Context, a *domain.Account) error
	// AccountGet returns the account name, or ErrNotFound.
	AccountGet(ctx context.Context, name string) (*domain.Account, error)
	// AccountList returns every account, by name.
	AccountList(ctx context.Context) ([]*domain.Account, error)
	// AccountUpdate writes a's settings (all but its name and CreatedAt)
	// over the account of its name, or is ErrNotFound.
	AccountUpdate(ctx context.Context, a *domain.Account) error
	// AccountLock returns the account name, as AccountGet does, and inside
	// a transaction keeps every other transaction's AccountLock and
	// AccountUpdate of it waiting until this one ends: what is decided
	// against its quotas holds until then.
	AccountLock(ctx context.Context, name string) (*domain.Account, error)
	// JobCountUnfinished counts the jobs of owner that are pending or
	// running, those still being created included.
	JobCountUnfinished(ctx context.Context, owner string) (int, error)
	// UploadSumBytes sums the Bytes of owner's uploads.
	UploadSumBytes(ctx context.Context, owner string) (int64, error)
	// TaskCountLeased counts owner's leased tasks that workers run (of
	// kinds chunk and tree).
	TaskCountLeased(ctx context.Context, owner string) (int, error)
	// TaskCountLeasedLocked counts the leased tasks that workers run of
	// each of owners (those with none are left out), after taking the
	// locks ClaimFair takes on accounts with a max_running, until the
	// transaction ends: what a claim leases of theirs against the counts
	// holds until then, across processes too.
	TaskCountLeasedLocked(ctx context.Context, owners []string) (map[string]int, error)
	// AccountTokenInsert records a new token of an account, by its hash;
	// a hash already there is ErrDuplicate.
	AccountTokenInsert(ctx context.Context, t *AccountToken) error
	// AccountTokenGet returns the token of hash, revoked or not, or
	// ErrNotFound.
	AccountTokenGet(ctx context.Context, hash string) (*AccountToken, error)
	// AccountTokenRevoke revokes, at p.Now, every token of p.Account not
	// yet revoked but p.Keep (when set), and returns how many it revoked.
	AccountTokenRevoke(ctx context.Context, p *AccountTokenRevokeParams) (int, error)
	// WorkerKeyInsert records a new worker key with the hash of its
	// secret; a name its account has already, or a hash already there,
	// is ErrDuplicate.
	WorkerKeyInsert(ctx context.Context, k *domain.WorkerKey, hash string) error
	// WorkerKeyGet returns the worker key of hash, or ErrNotFound.
	WorkerKeyGet(ctx context.Context, hash string) (*domain.WorkerKey, error)
	// WorkerKeyList returns the worker keys of account, or of every
	// account when account is "", by account then name.
	WorkerKeyList(ctx context.Context, account string) ([]*domain.WorkerKey, error)
	// WorkerKeyDelete deletes the worker key name of account, or is
	// ErrNotFound.
	WorkerKeyDelete(ctx context.Context, account, name string) error
	// WorkerKeyTrust sets whether the worker key name of account is
	// trusted, or is ErrNotFound.
	WorkerKeyTrust(ctx context.Context, account, name string, trusted bool) error
	// TaskListLeasedBy returns the IDs of the leased tasks whose
	// LeaseOwner starts with prefix, and of the leased ballots of chunks
	// being voted on whose LeaseOwner does (as replica IDs,
	// domain.ReplicaID).
	TaskListLeasedBy(ctx context.Context, prefix string) ([]string, error)
	// TaskListOpen returns, in claim order (priority descending, then
	// JobCreatedAt, JobID, ChunkIndex), up to p.Limit chunks of
	// p.Workloads (any when empty) that an untrusted worker of p.Account
	// may take: pending with no RunAfter, of jobs whose Workers is any, or
	// own and whose Owner is p.Account; and chunks being voted on with a
	// pending ballot whose Voters do not name p.Account; only the latter
	// with p.BallotsOnly; none of p.Skip, and no pending chunk of an owner
	// of p.SkipPendingOf. Inside a transaction, where the
	// database can, it locks them and skips rows another transaction has
	// locked.
	TaskListOpen(ctx context.Context, p *TaskListOpenParams) ([]*domain.Task, error)
	// TaskCountVoting counts the chunk tasks of job jobID being voted on
	// (leased to domain.QuorumLeaseOwner), up to limit.
	TaskCountVoting(ctx context.Context, jobID string, limit int) (int, error)

	// SessionInsert records a dashboard session.
	SessionInsert(ctx context.Context, s *Session) error
	// SessionLive returns who session id acts as when it was recorded,
	// not deleted, does not expire before now, its account is not
	// disabled and the token it was started with not revoked; else
	// ErrNotFound.
	SessionLive(ctx context.Context, id string, now time.Time) (domain.Caller, error)
	// SessionDelete deletes session id; a session that is not there is no
	// error.
	SessionDelete(ctx context.Context, id string) error
	// SessionDeleteExpired deletes the sessions that expired before
	// before and returns how many it deleted.
	SessionDeleteExpired(ctx context.Context, before time.Time) (int, error)

	// TaskLogAppend appends lines to a task's log, each with a new ID
	// greater than every ID before it. A task holds at most p.MaxLines
	// lines: the lines past that are dropped. With p.Offset set, Lines[i]
	// is the line at position *p.Offset+i of its attempt, and the lines at
	// positions up to the highest already stored for the attempt are
	// skipped, so that appending the same batch twice stores it once.
	TaskLogAppend(ctx context.Context, p *TaskLogAppendParams) error
	// TaskLogList returns up to p.Limit lines of a task's log with ID
	// greater than p.After, by ID ascending.
	TaskLogList(ctx context.Context, p *TaskLogListParams) ([]domain.LogLine, error)

	// TaskArgInsert inserts tree tasks' arguments, all or none.
	TaskArgInsert(ctx context.Context, args []domain.TaskArg) error
	// TaskArgList returns a task's arguments by position.
	TaskArgList(ctx context.Context, taskID string) ([]domain.TaskArg, error)
	// TaskArgResolve sets to p.Value the argument of task p.TaskID that is
	// the result of p.UpstreamID, if it has none yet, and reports whether
	// it set it (false on a replay, or when there is no such argument).
	TaskArgResolve(ctx context.Context, p *TaskArgResolveParams) (bool, error)
	// TaskArgListRefs returns the arguments of a job's (a tree's) tasks
	// that are results of upstream tasks, without their values, by task ID
	// then position; with p.Open, only those still waiting for the result.
	TaskArgListRefs(ctx context.Context, p *TaskArgListRefsParams) ([]domain.TaskArg, error)

	// OutboxInsert records messages to other shards and sets each one's ID,
	// greater than every ID before it.
	OutboxInsert(ctx context.Context, msgs []*OutboxMessage) error
	// OutboxClaim takes up to p.Limit messages due at p.Now (NextAttemptAt
	// set and not after it), lowest ID first, and sets their NextAttemptAt
	// to p.Until so that no other claim takes them before then; it returns
	// them as written. Concurrent claims never return the same message
	// before p.Until.
	OutboxClaim(ctx context.Context, p *OutboxClaimParams) ([]*OutboxMessage, error)
	// OutboxUpdate writes m's Attempts, NextAttemptAt (zero: given up on)
	// and LastError; ErrNotFound when m is gone.
	OutboxUpdate(ctx context.Context, m *OutboxMessage) error
	// OutboxDelete deletes the message with id; a missing one is no error.
	OutboxDelete(ctx context.Context, id int64) error
	// OutboxGetStats counts the messages still to deliver and those given up on.
	OutboxGetStats(ctx context.Context) (OutboxStats, error)

	// UploadInsert records an upload. A taken ID is ErrDuplicate.
	UploadInsert(ctx context.Context, u *domain.Upload) error
	// UploadGet returns the upload with id, or ErrNotFound.
	UploadGet(ctx context.Context, id string) (*domain.Upload, error)

	// InstallationGet returns the database's installation ID: random,
	// made with its schema and never changed, so that what is kept
	// outside the database (the blob store) can tell which database it
	// belongs to.
	InstallationGet(ctx context.Context) (string, error)
}

// JobUpdateCreationParams says which job's creation went on, when, and
// whether it is done.
type JobUpdateCreationParams struct {
	ID   string
	Now  time.Time
	Done bool
}

// JobListAbandonedParams selects jobs whose creation died.
type JobListAbandonedParams struct {
	Before time.Time // no progress since
	Limit  int       // jobs at most, at least 1
}

// JobMarker is what a read of a job's row and its root task's row says of
// the job's progress without counting its tasks: every write to either
// row bumps its version, and every chunk that completes writes the root
// (TaskDecrementUpstreams), as every change of the job's status writes
// the job.
type JobMarker struct {
	Status      domain.JobStatus
	Version     int64 // the job's
	RootVersion int64 // its root task's (RootTaskID); 0 when there is none
	// UpdatedAt is the later of the job's UpdatedAt and its root's: when
	// the state these versions mark began.
	UpdatedAt time.Time
}

// JobResultReadParams says which bytes of a job's final CSV to read.
type JobResultReadParams struct {
	ID     string
	Offset int64 // bytes from the start, 0 or more
	Limit  int   // bytes at most, 0 or more
}

// JobDeleteAbandonedParams says which abandoned job to delete and how much
// of it at once.
type JobDeleteAbandonedParams struct {
	ID     string
	Before time.Time // the job's creation must not have progressed since
	Limit  int       // tasks deleted per call, at least 1
}

// TaskLogAppendParams is a batch of log lines of one attempt of a task.
type TaskLogAppendParams struct {
	TaskID  string
	Attempt int
	Lines   []string
	// Offset is the position of Lines[0] among the lines the attempt sent
	// (0 for its first); nil when the sender numbers none, and then every
	// line is appended.
	Offset   *int64
	Now      time.Time
	MaxLines int
}

// TaskLogListParams selects a page of a task's log.
type TaskLogListParams struct {
	TaskID string
	After  int64 // the ID of the last line already seen; 0 from the start
	Limit  int
}

// TaskArgResolveParams is the result of an upstream task, for the
// argument of a task that awaits it.
type TaskArgResolveParams struct {
	TaskID     string
	UpstreamID string
	Value      []byte
}

// TaskArgListRefsParams selects the arguments of a tree's tasks that are
// results of upstream tasks.
type TaskArgListRefsParams struct {
	JobID string
	Open  bool // only those whose result has not arrived
}

// JobListParams selects a page of jobs.
type JobListParams struct {
	Status domain.JobStatus // empty for any
	Owner  string           // the account whose jobs to list; empty for everyone's
	Limit  int
	// After, when set, continues after the job with this (CreatedAt, ID).
	After *JobCursor
}

// JobCursor is the position of a job in JobList's order.
type JobCursor struct {
	CreatedAt time.Time
	ID        string
}

// TaskListParams selects a page of one job's tasks.
type TaskListParams struct {
	JobID string
	Kind  domain.TaskKind
	State domain.TaskState // empty for any
	Limit int
	// AfterIndex continues after this ChunkIndex; -1 (or less) from the start.
	AfterIndex int
}

// TaskListExpiredParams selects leases expired by Now.
type TaskListExpiredParams struct {
	Now   time.Time
	Limit int // tasks at most; 0 or less for all
}

// TaskCancelJobParams says which job's tasks to cancel, and when.
type TaskCancelJobParams struct {
	JobID  string
	Except string // the ID of a task to leave as it is; empty for none
	Now    time.Time
}

// TaskDecrementUpstreamsParams says how many upstreams of which task
// completed, and when.
type TaskDecrementUpstreamsParams struct {
	ID  string
	N   int
	Now time.Time
}

// TaskRetryJobParams says which job's chunks to run again, and with how
// many attempts each.
type TaskRetryJobParams struct {
	JobID       string
	MaxAttempts int // attempts granted on top of those already made
	Now         time.Time
}

// TaskClaimParams says who claims what.
type TaskClaimParams struct {
	Owners    []string // one per task wanted, in the order tasks are handed out
	Kinds     []domain.TaskKind
	Workloads []string // empty for any
	Now       time.Time
	// Fair claims in fair-share order between the tasks' owners (SPEC
	// §9; see ClaimFair) rather than first in, first out. It applies to
	// a claim of one kind other than stitch; other claims ignore it.
	Fair bool
	// WorkEpoch tells fair claims when work was added: while it stays
	// the same, a fair claim may rely on what an earlier one read about
	// which accounts and jobs have runnable work, for FairMemoFor at
	// most (see ClaimFair).
	WorkEpoch uint64
}

// TaskListOpenParams says whose untrusted worker looks for what.
type TaskListOpenParams struct {
	Account     string
	Workloads   []string // empty for any
	Limit       int
	BallotsOnly bool     // chunks with a pending ballot alone
	Skip        []string // IDs not to return: those read before
	// SkipPendingOf names owners whose pending chunks are not returned
	// (accounts at their max_running); their chunks being voted on are.
	SkipPendingOf []string
}

// TaskMakeRunnableParams says which tasks in backoff become runnable.
type TaskMakeRunnableParams struct {
	Now   time.Time
	Limit int // at most this many, soonest RunAfter first
}

// OutboxMessage is a message to another shard, recorded in the same
// transaction as the change that causes it and delivered until that shard
// acknowledges it.
type OutboxMessage struct {
	ID            int64
	Shard         string // the receiving shard
	Kind          string
	Payload       []byte
	Attempts      int       // deliveries tried so far
	NextAttemptAt time.Time // zero once given up on
	LastError     string
	CreatedAt     time.Time
}

// OutboxClaimParams says which messages to take and until when.
type OutboxClaimParams struct {
	Now   time.Time
	Until time.Time
	Limit int
}

// OutboxStats is the size of the outbox.
type OutboxStats struct {
	Pending int       // still to deliver
	Dead    int       // refused for good by their receiver
	Oldest  time.Time // CreatedAt of the oldest pending message; zero when none
}

// TaskCountFinishedParams chooses the job and the time buckets of
// TaskCountFinished. Width is at least a microsecond, Buckets at least 1.
type TaskCountFinishedParams struct {
	JobID   string
	Start   time.Time
	Width   time.Duration
	Buckets int
}

// TaskCount is how many tasks of a kind are in a state.
type TaskCount struct {
	Kind  domain.TaskKind
	State domain.TaskState
	N     int
}

// WorkerUpsertParams says which worker called when.
type WorkerUpsertParams struct {
	ID        string
	Now       time.Time
	Heartbeat bool
	// Announced says that the call named the workloads the worker runs:
	// Workloads, sorted, none when it takes any.
	Announced bool
	Workloads []string
	Versions  map[string]string // of some of Workloads: what the worker says it runs for them
}

// WorkerListParams selects the workers seen lately.
type WorkerListParams struct {
	Since time.Time // seen at or after
	Limit int       // workers at most; 0 or less for all
}

// WorkerPageParams selects a page of the workers seen lately.
type WorkerPageParams struct {
	Since  time.Time     // seen at or after
	Prefix string        // of their IDs; "" for any
	After  *WorkerCursor // continue after this worker; nil from the start
	Limit  int           // workers at most; 0 or less for all
}

// WorkerCursor is the position of a worker in WorkerPage's order.
type WorkerCursor struct {
	LastSeen time.Time
	ID       string
}

// Worker is a worker as the coordinators last saw it.
type Worker struct {
	ID            string
	FirstSeen     time.Time
	LastSeen      time.Time         // its last call
	LastHeartbeat time.Time         // its last lease renewal; zero when none
	Workloads     []string          // named by its last chunk claim, sorted; nil when none (it takes any)
	Versions      map[string]string // the versions that claim announced for some of them; nil when none
	TasksDone     int64             // tasks it completed
}

// JoinWorkloads is how both stores keep a worker's workloads in one text
// column: the names, space separated, each followed by "=" and the
// version the worker announced for it, if any (neither a workload's name
// nor a version holds a space or "=").
func JoinWorkloads(names []string, versions map[string]string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n)
		if v := versions[n]; v != "" {
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}

// SplitWorkloads reads what JoinWorkloads wrote; "" is nil, and so are
// the versions when there are none.
func SplitWorkloads(s string) (names []string, versions map[string]string) {
	for _, f := range strings.Fields(s) {
		name, v, ok := strings.Cut(f, "=")
		names = append(names, name)
		if ok {
			if versions == nil {
				versions = map[string]string{}
			}
			versions[name] = v
		}
	}
	return names, versions
}

// TaskResultListParams selects a page of a job's chunk outputs.
type TaskResultListParams struct {
	JobID string
	// AfterIndex continues after this ChunkIndex; -1 (or less) from the start.
	AfterIndex int
	Limit      int
}

// ChunkResult is a completed chunk's output, for the stitcher.
type ChunkResult struct {
	ChunkIndex int
	Result     []byte
}

// Session is a dashboard session.
type Session struct {
	ID        string // the hash of its secret
	Account   string
	TokenHash string // of the token it was started with; empty for the client token
	ExpiresAt time.Time
}

// AccountToken is a token of an account, kept by the hash of its secret:
// the secret itself is shown once, when it is made, and never stored.
type AccountToken struct {
	Hash      string // hex sha256 of the token
	Account   string
	CreatedAt time.Time
	RevokedAt time.Time // zero while the token is valid
}

// AccountTokenRevokeParams says whose tokens AccountTokenRevoke revokes.
type AccountTokenRevokeParams struct {
	Account string
	Keep    string // a hash not to revoke; "" revokes them all
	Now     time.Time
}
