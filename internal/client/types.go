package client

import (
	"encoding/json"
	"net/http"
	"time"
)

// Job statuses (Job.Status).
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Task states (Task.State).
const (
	TaskWaiting   = "waiting"
	TaskPending   = "pending"
	TaskLeased    = "leased"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// Orders of a job's scores (Job.Order, Task.Order).
const (
	Desc = "desc" // higher scores first
	Asc  = "asc"  // lower scores first
)

// Upload is the answer of POST /upload: a stored table, to be named by a
// job's input.
type Upload struct {
	UploadID string `json:"upload_id"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
	Rows     int64  `json:"rows"` // every record, the header included
}

// JobRequest is the body of POST /jobs. Zero fields are left out, so the
// coordinator applies its defaults (top_k 100, score_column "score", …).
type JobRequest struct {
	Name         string          `json:"name,omitempty"`
	Workload     string          `json:"workload"`
	Parameters   json.RawMessage `json:"parameters,omitempty"` // a JSON object handed to the workload
	Input        JobInput        `json:"input"`
	ChunkRows    int             `json:"chunk_rows,omitempty"`
	HasHeader    *bool           `json:"has_header,omitempty"` // nil: true
	TopK         int             `json:"top_k,omitempty"`
	ScoreColumn  string          `json:"score_column,omitempty"`
	Order        string          `json:"order,omitempty"` // Desc or Asc
	MaxAttempts  int             `json:"max_attempts,omitempty"`
	LeaseSeconds int             `json:"lease_seconds,omitempty"`
	Priority     int             `json:"priority,omitempty"`
	// TimeoutSeconds bounds each attempt's run; 0 for no limit.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// Workers says who may run the chunks: "trusted" (when empty), "own"
	// or "any"; Quorum, for "any" alone, how many accounts must agree on
	// an untrusted worker's output (0: the default, 2).
	Workers string `json:"workers,omitempty"`
	Quorum  int    `json:"quorum,omitempty"`
	// Columns are input columns the final CSV carries, joined by
	// IDColumn ("": the default, "id").
	Columns  []string `json:"columns,omitempty"`
	IDColumn string   `json:"id_column,omitempty"`
	// Cache false runs every chunk, whatever the chunk cache remembers,
	// and remembers none of the job's outputs; nil is true.
	Cache *bool `json:"cache,omitempty"`
	// SpeculateAfter is after how many times the median chunk time a
	// straggling chunk gets a backup attempt; 0 turns backups off, nil is
	// the default, 3.
	SpeculateAfter *float64 `json:"speculate_after,omitempty"`
}

// JobInput names a job's input: an upload, or chunks hosted elsewhere.
type JobInput struct {
	UploadID string     `json:"upload_id,omitempty"`
	Chunks   []ChunkRef `json:"chunks,omitempty"`
}

// ChunkRef is one chunk of a job's input hosted elsewhere.
type ChunkRef struct {
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes,omitempty"` // 0 when unknown
}

// TaskCounts counts a job's chunk tasks by state (the stitch task is not
// counted).
type TaskCounts struct {
	Total     int `json:"total"`
	Pending   int `json:"pending"`
	Leased    int `json:"leased"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Job is a job as the coordinator reports it.
type Job struct {
	JobID      string     `json:"job_id"`
	Name       string     `json:"name"`
	Owner      string     `json:"owner"` // the account that created it
	Workload   string     `json:"workload"`
	Status     string     `json:"status"` // JobPending, JobRunning, …
	Priority   int        `json:"priority"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at"` // nil until final
	Error      string     `json:"error"`       // why it failed; names the failed task
	Progress   float64    `json:"progress"`    // completed chunks over all, 0..1
	Tasks      TaskCounts `json:"tasks"`
	// ProgressToken changes whenever the job's status or its completed,
	// failed or cancelled counts change (not on leases alone); WaitJob
	// waits for it to differ from the one passed.
	ProgressToken string          `json:"progress_token"`
	Parameters    json.RawMessage `json:"parameters"`
	ChunkRows     int             `json:"chunk_rows"`
	HasHeader     bool            `json:"has_header"`
	TopK          int             `json:"top_k"`
	ScoreColumn   string          `json:"score_column"`
	Order         string          `json:"order"`
	MaxAttempts   int             `json:"max_attempts"`
	LeaseSeconds  int             `json:"lease_seconds"`
	Workers       string          `json:"workers"`       // who may run its chunks: trusted, own or any
	Quorum        int             `json:"quorum"`        // for workers "any"; else 0
	Columns       []string        `json:"columns"`       // input columns the final CSV carries
	IDColumn      string          `json:"id_column"`     // the column that joins them; "" without columns
	ResultSHA256  string          `json:"result_sha256"` // of the final CSV, once completed
}

// Final reports whether the job reached a status it never leaves.
func (j *Job) Final() bool {
	return j.Status == JobCompleted || j.Status == JobFailed || j.Status == JobCancelled
}

// JobList is a page of jobs; NextCursor is "" on the last page.
type JobList struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor"`
}

// TaskList is a page of a job's chunk tasks; NextCursor is "" on the last
// page.
type TaskList struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor"`
}

// TaskInput says where a worker downloads a task's input.
type TaskInput struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"` // hex of the input's SHA-256
	Bytes  int64  `json:"bytes"`  // 0 when unknown
	// Range, set when URL is signed into the coordinators' blob store,
	// is the Range header the GET must carry (the signature covers it);
	// HeaderLine then comes before the bytes it returns. SHA256 and
	// Bytes are those of the whole, the header line included.
	Range      string `json:"range,omitempty"`
	HeaderLine string `json:"header_line,omitempty"`
}

// Task is a task as a claim hands it to a worker (the fields up to Input)
// or as GET /tasks/{id} reports it (all of them).
type Task struct {
	TaskID         string          `json:"task_id"`
	JobID          string          `json:"job_id"`
	ChunkIndex     int             `json:"chunk_index"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"` // nil when not leased
	Workload       string          `json:"workload"`
	Parameters     json.RawMessage `json:"parameters"`
	TopK           int             `json:"top_k"`
	ScoreColumn    string          `json:"score_column"`
	Order          string          `json:"order"`
	HasHeader      bool            `json:"has_header"`
	Input          TaskInput       `json:"input"`
	// TimeoutSeconds bounds how long an attempt may run, from its claim;
	// 0 means no bound. An attempt that runs longer is killed and reported
	// as a retryable failure.
	TimeoutSeconds int `json:"timeout_seconds"`

	State      string    `json:"state"`       // TaskPending, TaskLeased, …
	LeaseOwner string    `json:"lease_owner"` // the worker holding the lease, if any
	Error      string    `json:"error"`       // why the last attempt failed
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	// LeaseDeadline is LeaseExpiresAt on the local clock, estimated when
	// the claim was answered; zero when not leased. See Lease.
	LeaseDeadline time.Time `json:"-"`
}

// Final reports whether the task reached a state it never leaves.
func (t *Task) Final() bool {
	return t.State == TaskCompleted || t.State == TaskFailed || t.State == TaskCancelled
}

// Lease returns the task's lease as claimed; the zero Lease when the task
// is not leased.
func (t *Task) Lease() Lease {
	if t.LeaseExpiresAt == nil {
		return Lease{}
	}
	return Lease{ExpiresAt: *t.LeaseExpiresAt, Deadline: t.LeaseDeadline}
}

// Lease is when a lease ends, as a claim or a heartbeat answered it.
type Lease struct {
	// ExpiresAt is the end of the lease by the coordinator's clock.
	ExpiresAt time.Time `json:"lease_expires_at"`
	// Deadline is the same instant on the local clock, so that a worker
	// whose clock is off still renews in time. It is measured from the
	// answer's Date header (the coordinator's clock, to the second, taken
	// as a second later than it says) and the local time the answer
	// arrived; without a Date header, from the local clock alone.
	Deadline time.Time `json:"-"`
}

// localDeadline estimates expires on the local clock; see Lease.Deadline.
func localDeadline(expires time.Time, h http.Header, received time.Time) time.Time {
	left := expires.Sub(received)
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		left = expires.Sub(date.Add(time.Second))
	}
	return received.Add(max(left, 0))
}

// ClaimRequest is the body of POST /tasks/claim.
type ClaimRequest struct {
	WorkerID  string   `json:"worker_id"`
	Workloads []string `json:"workloads,omitempty"` // nil: any workload
	// WorkloadVersions is the version the worker runs of some of
	// Workloads, by name, which the coordinator's chunk cache keys
	// outputs by.
	WorkloadVersions map[string]string `json:"workload_versions,omitempty"`
	WaitSeconds      float64           `json:"wait_seconds,omitempty"`
}

// Result is a worker's result for one task: POST /tasks/{id}/result, or an
// item of POST /tasks/results (where TaskID is sent).
type Result struct {
	TaskID   string          `json:"task_id,omitempty"`
	WorkerID string          `json:"worker_id"`
	Attempt  int             `json:"attempt"`
	Output   string          `json:"output"`            // CSV with a header, at most top_k rows
	Metrics  json.RawMessage `json:"metrics,omitempty"` // optional JSON object
	// WorkloadVersion is the version of the workload that gave Output;
	// the coordinator's chunk cache remembers the output under it.
	WorkloadVersion string `json:"workload_version,omitempty"`
}

// ResultStatus is the outcome of one item of CompleteMany: Status is the
// HTTP status the single form would have answered, and Err its error (nil
// for 200).
type ResultStatus struct {
	TaskID string
	Status int
	Err    *Error
}

// Failure is the body of POST /tasks/{id}/failure.
type Failure struct {
	WorkerID  string `json:"worker_id"`
	Attempt   int    `json:"attempt"`
	Error     string `json:"error"`     // for people: what went wrong and where
	Retryable bool   `json:"retryable"` // false fails the task (and its job) for good
	// Release gives the task back at once, without backoff and without
	// holding the attempt against it: for a worker shutting down.
	Release bool `json:"release,omitempty"`
}

// LogLines is the body of POST /tasks/{id}/logs.
type LogLines struct {
	WorkerID string `json:"worker_id"`
	Attempt  int    `json:"attempt"`
	// Offset, when set, is the position of Lines[0] among the lines the
	// attempt has sent (0 for its first). It makes sending the same batch
	// again harmless: the coordinator skips lines it already holds.
	Offset *int64   `json:"offset,omitempty"`
	Lines  []string `json:"lines"`
}
