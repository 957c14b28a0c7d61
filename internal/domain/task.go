package domain

import (
	"encoding/json"
	"time"
)

// Task is one unit of work: a chunk of a job, a job's stitch, or a node of a
// task tree. The fencing token of a lease is (ID, Attempt, LeaseOwner).
type Task struct {
	ID               string
	JobID            string     // empty for tree tasks that belong to no job
	Owner            string     // the account of its job or tree, copied for claims
	Workers          WorkerMode // who may run it: its job's, copied for claims; trusted for other tasks
	Voters           string     // of a replica: ",ACCOUNT,…," of the other replicas of its chunk run when it was made
	Kind             TaskKind
	Workload         string
	ChunkIndex       int // position among the job's chunks; -1 for the stitch task
	State            TaskState
	Attempt          int // number of leases handed out so far
	MaxAttempts      int
	LeaseSeconds     int
	LeaseOwner       string
	LeaseExpiresAt   time.Time // zero when not leased; never after AttemptDeadline
	TimeoutSeconds   int       // how long one attempt may run; 0 for no limit
	AttemptDeadline  time.Time // when the last attempt times out: its claim + TimeoutSeconds; zero when none
	LeasedAt         time.Time // when the last attempt was leased: where its charged time starts; zero before the first
	RunAfter         time.Time // not claimable before this instant (retry backoff)
	Priority         int
	JobCreatedAt     time.Time // the job's creation time, copied for claim order
	InputURI         string
	InputSHA256      string
	InputBytes       int64           // bytes a worker downloads; 0 when unknown
	InputOffset      int64           // for chunks of an upload: where the chunk's records start in it
	InputLength      int64           // and how many bytes they take (the header not included)
	Result           []byte          // the recorded output: CSV for chunks
	Metrics          json.RawMessage // optional worker-reported metrics; nil when none
	Error            string          // why the last attempt failed, for people
	DownstreamID     string          // the task this one's result flows to; empty for a root
	PendingUpstreams int             // upstream tasks not yet completed
	CreatedAt        time.Time
	UpdatedAt        time.Time
	FinishedAt       time.Time // zero until the task reaches a final state
	Version          int64     // optimistic-concurrency counter, bumped by every write
	Ballots          []Ballot  // of a chunk being voted on: its replicas (see Ballot)
	// Second is the other attempt of a chunk leased twice, a straggler
	// and its backup (see Speculate); nil when it is leased once.
	Second *SecondLease
}

// LeaseLive reports whether the task is leased, its lease has not expired
// at now and its attempt has not reached its deadline.
func (t *Task) LeaseLive(now time.Time) bool {
	return t.State == TaskLeased && now.Before(t.LeaseExpiresAt) && !t.TimedOut(now)
}

// TimedOut reports whether t's last attempt has a deadline and reached it
// by now. The deadline stays after the attempt ended, until the next claim.
func (t *Task) TimedOut(now time.Time) bool {
	return !t.AttemptDeadline.IsZero() && !now.Before(t.AttemptDeadline)
}

// HoldsLease reports whether (worker, attempt) is the live lease of t at now.
func (t *Task) HoldsLease(worker string, attempt int, now time.Time) bool {
	return t.LeaseLive(now) && t.LeaseOwner == worker && t.Attempt == attempt
}

// TaskArg is one argument of a tree task: a JSON value given at submission,
// or the result of an upstream task, which is nil until that task completes.
type TaskArg struct {
	TaskID     string
	Position   int
	Value      []byte // JSON; nil while an upstream's result has not arrived
	UpstreamID string // the task whose result this argument is; empty for a given value
}

// TaskCounts counts a job's chunk tasks by state.
type TaskCounts struct {
	Total     int `json:"total"`
	Waiting   int `json:"-"`
	Pending   int `json:"pending"`
	Leased    int `json:"leased"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Cached    int `json:"cached"` // of Completed, those the chunk cache completed, not run
}

// Add counts n tasks in state s.
func (c *TaskCounts) Add(s TaskState, n int) {
	c.Total += n
	switch s {
	case TaskWaiting:
		c.Waiting += n
	case TaskPending:
		c.Pending += n
	case TaskLeased:
		c.Leased += n
	case TaskCompleted:
		c.Completed += n
	case TaskFailed:
		c.Failed += n
	case TaskCancelled:
		c.Cancelled += n
	}
}

// Progress is the share of completed tasks, 0 when there are none.
func (c TaskCounts) Progress() float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Completed) / float64(c.Total)
}

// NormRunAfter clears t.RunAfter when it is not after t.UpdatedAt: the task
// is runnable at once, which stores record as no RunAfter at all, so that
// only tasks in backoff carry one (and claims never walk past them).
func NormRunAfter(t *Task) {
	if !t.RunAfter.After(t.UpdatedAt) {
		t.RunAfter = time.Time{}
	}
}
