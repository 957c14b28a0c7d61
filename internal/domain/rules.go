package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// JobSpec is what a client asks for when creating a job, with defaults
// already applied. Validate checks it against the documented bounds.
type JobSpec struct {
	Name         string
	Workload     string
	Parameters   json.RawMessage
	Chunks       []ChunkRef // hosted chunks; or
	UploadID     string     // an upload to cut into chunks of ChunkRows records
	ChunkRows    int
	HasHeader    bool
	TopK         int
	ScoreColumn  string
	Order        Order
	MaxAttempts  int
	LeaseSeconds int
	Priority     int
	// TimeoutSeconds is left out of the request's hash when 0, so that a
	// request made before the setting existed replays to the same job.
	TimeoutSeconds int `json:",omitempty"`
	// Workers is "" for WorkersTrusted, and Quorum 0 but for
	// WorkersAny, so that a request made before they existed replays
	// to the same job.
	Workers WorkerMode `json:",omitempty"`
	Quorum  int        `json:",omitempty"`
	// Columns are input columns the final CSV carries, joined by
	// IDColumn; both are empty when none are asked for, so that a
	// request made before they existed replays to the same job.
	Columns  []string `json:",omitempty"`
	IDColumn string   `json:",omitempty"`
	// NoCache is "cache": false.
	NoCache bool `json:",omitempty"`
	// SpeculateAfter is nil for DefaultSpeculateAfter, so that a request
	// made before it existed replays to the same job.
	SpeculateAfter *float64 `json:",omitempty"`
}

// ChunkRef is one input chunk: where a worker downloads it and its checksum.
type ChunkRef struct {
	URI    string
	SHA256 string
	Bytes  int64
}

var sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validName reports whether s is 1-128 characters of A-Z a-z 0-9 . _ : -,
// the form of workload names and worker IDs. Every claim and result
// checks one, so it is a loop rather than a regular expression.
func validName(s string) bool { return validToken(s, '-') }

// validToken reports whether s is 1-128 characters of A-Z a-z 0-9 . _ : -
// and also.
func validToken(s string, also byte) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-', c == also:
		default:
			return false
		}
	}
	return true
}

// MaxChunks bounds the chunks of one job.
const MaxChunks = 10_000_000

// Validate reports the first rule s breaks, as an ErrInvalidArgument.
func (s *JobSpec) Validate() error {
	if s.Workload == "" {
		return Invalidf("workload is required: name the workload that scores the rows")
	}
	if !validName(s.Workload) {
		return Invalidf("workload %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", s.Workload)
	}
	if len(s.Name) > 256 {
		return Invalidf("name is %d bytes long; at most 256", len(s.Name))
	}
	if strings.ContainsRune(s.Name, 0) || strings.ContainsRune(s.ScoreColumn, 0) {
		return Invalidf("name and score_column must not contain NUL characters")
	}
	p := bytes.TrimSpace(s.Parameters)
	if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return Invalidf("parameters must be a JSON object")
	}
	if err := checkParametersSize(p); err != nil {
		return err
	}
	if err := inRange("chunk_rows", s.ChunkRows, MinChunkRows, MaxChunkRows); err != nil {
		return err
	}
	if err := inRange("top_k", s.TopK, MinTopK, MaxTopK); err != nil {
		return err
	}
	if err := inRange("max_attempts", s.MaxAttempts, MinMaxAttempts, MaxMaxAttempts); err != nil {
		return err
	}
	if err := inRange("lease_seconds", s.LeaseSeconds, MinLeaseSeconds, MaxLeaseSeconds); err != nil {
		return err
	}
	if err := inRange("priority", s.Priority, MinPriority, MaxPriority); err != nil {
		return err
	}
	if s.TimeoutSeconds < MinTimeoutSeconds || s.TimeoutSeconds > MaxTimeoutSeconds {
		return Invalidf("timeout_seconds is %d; it must be between %d (no timeout) and %d (7 days)",
			s.TimeoutSeconds, MinTimeoutSeconds, MaxTimeoutSeconds)
	}
	if err := s.checkWorkers(); err != nil {
		return err
	}
	if s.ScoreColumn == "" || len(s.ScoreColumn) > 256 {
		return Invalidf("score_column must be 1-256 bytes long")
	}
	if s.Order != Desc && s.Order != Asc {
		return Invalidf("order %q must be \"desc\" or \"asc\"", s.Order)
	}
	if err := s.checkColumns(); err != nil {
		return err
	}
	if v := s.SpeculateAfter; v != nil && *v != 0 && !(*v >= MinSpeculateAfter && *v <= MaxSpeculateAfter) {
		return Invalidf("speculate_after is %v; it must be 0 (no backups) or between %v and %v", *v, MinSpeculateAfter, MaxSpeculateAfter)
	}
	if s.UploadID != "" {
		if !ValidID(s.UploadID) {
			return Invalidf("input.upload_id %q is not an ID this coordinator hands out", s.UploadID)
		}
		if len(s.Chunks) > 0 {
			return Invalidf("input takes upload_id or chunks, not both")
		}
		return nil
	}
	if len(s.Chunks) == 0 {
		return Invalidf("input needs at least one chunk")
	}
	if len(s.Chunks) > MaxChunks {
		return Invalidf("input has %d chunks; at most %d", len(s.Chunks), MaxChunks)
	}
	for i, c := range s.Chunks {
		if u, err := url.Parse(c.URI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(c.URI) > 4096 {
			return Invalidf("input.chunks[%d].uri %q must be an http or https URL of at most 4096 bytes", i, c.URI)
		}
		if !sha256Re.MatchString(c.SHA256) {
			return Invalidf("input.chunks[%d].sha256 must be 64 lowercase hex digits", i)
		}
		if c.Bytes < 0 {
			return Invalidf("input.chunks[%d].bytes must not be negative", i)
		}
	}
	return nil
}

// MaxColumns bounds the input columns a job's final CSV carries.
const MaxColumns = 32

// DefaultIDColumn is the column that joins outputs to input rows.
const DefaultIDColumn = "id"

// checkColumns checks the input columns asked for: at most MaxColumns
// distinct names other than the id and score columns, from a table with a
// header that the coordinator holds (an upload), since it joins them.
func (s *JobSpec) checkColumns() error {
	if len(s.Columns) == 0 {
		if s.IDColumn != "" {
			return Invalidf("id_column joins the input columns named by columns; name them, or leave id_column out")
		}
		return nil
	}
	if len(s.Columns) > MaxColumns {
		return Invalidf("columns names %d columns; at most %d", len(s.Columns), MaxColumns)
	}
	if !validColumn(s.IDColumn) {
		return Invalidf("id_column must be 1-256 bytes long, without NUL characters")
	}
	seen := make(map[string]bool, len(s.Columns))
	for i, c := range s.Columns {
		switch {
		case !validColumn(c):
			return Invalidf("columns[%d] must be 1-256 bytes long, without NUL characters", i)
		case seen[c]:
			return Invalidf("columns names %q twice", c)
		case c == s.IDColumn:
			return Invalidf("columns names the id column %q, which the outputs already carry", c)
		case c == s.ScoreColumn:
			return Invalidf("columns names the score column %q, which the outputs already carry", c)
		}
		seen[c] = true
	}
	if !s.HasHeader {
		return Invalidf("columns names input columns by their header: it needs has_header true")
	}
	if s.UploadID == "" {
		return Invalidf("columns needs input.upload_id: the coordinator joins the columns from the chunks it stores, and hosted chunks are not stored here")
	}
	return nil
}

func validColumn(name string) bool {
	return name != "" && len(name) <= 256 && !strings.ContainsRune(name, 0)
}

// MaxParametersBytes bounds a job's parameters, measured as compact JSON
// (without insignificant whitespace), so that the limit does not depend on
// how the client formatted them.
const MaxParametersBytes = 64 << 10

// checkParametersSize refuses parameters (valid JSON) larger than
// MaxParametersBytes once compacted.
func checkParametersSize(p []byte) error {
	n := len(p)
	if n <= MaxParametersBytes {
		return nil // compacting never makes JSON longer
	}
	var c bytes.Buffer
	if err := json.Compact(&c, p); err != nil {
		return Invalidf("parameters must be a JSON object")
	}
	if n = c.Len(); n <= MaxParametersBytes {
		return nil
	}
	return Invalidf("parameters are %d bytes as compact JSON; at most %d (64 KiB): "+
		"put large data in the job's input (an upload or hosted chunks) and pass only settings as parameters", n, MaxParametersBytes)
}

func inRange(name string, v, lo, hi int) error {
	if v < lo || v > hi {
		return Invalidf("%s is %d; it must be between %d and %d", name, v, lo, hi)
	}
	return nil
}

// ValidID reports whether id could name a job, task or upload: 1-256
// bytes of printable text (IDs are opaque, but never hold control bytes).
func ValidID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// CheckLeaseRequest checks the form of the (worker, attempt) a worker names
// when it writes to a task: every transport calls the engine, which calls
// this, so that the rule lives once.
func CheckLeaseRequest(worker string, attempt int) error {
	if !ValidWorkerID(worker) {
		return Invalidf("worker_id %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", worker)
	}
	if attempt < 1 {
		return Invalidf("attempt is %d; send the attempt of your lease (1 or more)", attempt)
	}
	return nil
}

// ValidWorkerID reports whether id is 1-128 of [A-Za-z0-9._:-].
func ValidWorkerID(id string) bool { return validName(id) }

// ValidVersion reports whether v could be a workload's version: 1-128
// characters of A-Z a-z 0-9 . _ : + -.
func ValidVersion(v string) bool { return validToken(v, '+') }

// ValidWorkload reports whether name is a well-formed workload name.
func ValidWorkload(name string) bool { return validName(name) }

// CheckLease returns nil when (worker, attempt) holds t's live lease at now.
// Otherwise it returns ErrCancelled when t was cancelled or failed for good —
// either means its job is over, since the first task that fails for good
// fails its job and cancels the rest in the same transaction — else
// ErrLeaseLost.
func CheckLease(t *Task, worker string, attempt int, now time.Time) error {
	if t.Kind == KindReplica && t.State.Final() && t.State != TaskCompleted {
		return fmt.Errorf("replica %s: %s; stop working on it: %w", t.ID, t.Error, ErrLeaseLost)
	}
	if t.State == TaskCancelled || t.State == TaskFailed {
		return fmt.Errorf("task %s is %s and its job is over; stop working on it: %w", t.ID, t.State, ErrCancelled)
	}
	if s := t.Second; t.State == TaskLeased && s.holds(worker, attempt) {
		switch {
		case s.live(now):
			return nil
		case !s.Deadline.IsZero() && !now.Before(s.Deadline):
			return fmt.Errorf("task %s: attempt %d %s (its deadline was %s); stop working on it: %w",
				t.ID, attempt, TimeoutError(t.TimeoutSeconds), s.Deadline.UTC().Format(time.RFC3339), ErrLeaseLost)
		}
		return fmt.Errorf("task %s: the lease of worker %q attempt %d ended; attempt %d runs: %w",
			t.ID, worker, attempt, t.Attempt, ErrLeaseLost)
	}
	if t.HoldsLease(worker, attempt, now) {
		return nil
	}
	if t.State == TaskLeased && t.LeaseOwner == worker && t.Attempt == attempt && t.TimedOut(now) {
		return fmt.Errorf("task %s: attempt %d %s (its deadline was %s); stop working on it: %w",
			t.ID, attempt, TimeoutError(t.TimeoutSeconds), t.AttemptDeadline.UTC().Format(time.RFC3339), ErrLeaseLost)
	}
	return fmt.Errorf("task %s: worker %q attempt %d does not hold the current lease (attempt %d, %s): %w",
		t.ID, worker, attempt, t.Attempt, t.State, ErrLeaseLost)
}

// CheckLogWrite returns nil when (worker, attempt) may append to t's log
// at now: it holds the live lease, or its attempt is the one that just
// completed or failed t, so that lines sent just after the outcome are
// kept — but never once that attempt's deadline has passed. Otherwise it
// returns what CheckLease does.
func CheckLogWrite(t *Task, worker string, attempt int, now time.Time) error {
	ownOutcome := (t.State == TaskCompleted || t.State == TaskFailed) &&
		t.LeaseOwner == worker && t.Attempt == attempt && !t.TimedOut(now)
	if ownOutcome {
		return nil
	}
	return CheckLease(t, worker, attempt, now)
}

// Lease leases t, runnable, to worker at now, as a claim does: the next
// attempt, a lease of LeaseSeconds that never outlasts the attempt's
// deadline (TimeoutSeconds from now, when set).
func Lease(t *Task, worker string, now time.Time) {
	t.State = TaskLeased
	t.LeaseOwner = worker
	t.Attempt = t.attempts() + 1
	t.Second = nil
	t.AttemptDeadline = time.Time{}
	if t.TimeoutSeconds > 0 {
		t.AttemptDeadline = now.Add(time.Duration(t.TimeoutSeconds) * time.Second)
	}
	t.RunAfter = time.Time{}
	t.UpdatedAt = now
	t.LeasedAt = now
	Renew(t, now)
}

// Renew extends t's lease by its lease duration from now, but never past
// its attempt's deadline.
func Renew(t *Task, now time.Time) {
	t.LeaseExpiresAt = now.Add(time.Duration(t.LeaseSeconds) * time.Second)
	if !t.AttemptDeadline.IsZero() && t.AttemptDeadline.Before(t.LeaseExpiresAt) {
		t.LeaseExpiresAt = t.AttemptDeadline
	}
	t.UpdatedAt = now
}

// TimeoutError is the error of an attempt that ran for its whole timeout.
func TimeoutError(seconds int) string { return fmt.Sprintf("timed out after %d s", seconds) }

// ExpireLease ends t's lease, which ran out at or before now. An attempt
// that reached its deadline timed out: a retryable failure like any other,
// with the error TimeoutError, pending again after backoff while attempts
// remain. Otherwise its owner stopped renewing it: the error is reason and
// t is pending again at once while attempts remain. Either way, on its last
// attempt t fails for good. It reports whether the attempt timed out and
// whether t failed for good.
//
// A stitch task is the coordinators' own work, not a worker's: its lease
// runs out only when the coordinator that held it stopped (killed,
// restarted, cut off from the database), which says nothing about the
// job. It goes back to pending at once, as a release does, never counted
// against max_attempts and never failing the job.
func ExpireLease(t *Task, reason string, backoff time.Duration, now time.Time) (timedOut, final bool) {
	if t.Kind == KindStitch {
		Release(t, reason, now)
		return false, false
	}
	if t.TimedOut(now) {
		return true, Retry(t, TimeoutError(t.TimeoutSeconds), true, backoff, now)
	}
	return false, Retry(t, reason, true, 0, now)
}

// CompleteOutcome says what Complete did.
type CompleteOutcome int

// The outcomes of Complete.
const (
	Completed CompleteOutcome = iota // the task is now completed
	Replayed                         // the same result was already recorded; nothing changed
)

// Complete records output as t's result for (worker, attempt). A replay of
// the recorded result by the same attempt changes nothing and reports
// Replayed; a different result for a completed task is ErrConflict.
func Complete(t *Task, worker string, attempt int, output []byte, metrics json.RawMessage, now time.Time) (CompleteOutcome, error) {
	Focus(t, worker, attempt, now)
	if t.State == TaskCompleted && t.Second.holds(worker, attempt) {
		return 0, fmt.Errorf("task %s was completed by its other attempt, %d: %w", t.ID, t.Attempt, ErrLeaseLost)
	}
	if t.State == TaskCompleted {
		if !bytes.Equal(t.Result, output) {
			return 0, fmt.Errorf("task %s already completed with a different result: %w", t.ID, ErrConflict)
		}
		if t.Attempt == attempt && t.LeaseOwner == worker {
			return Replayed, nil
		}
		return 0, fmt.Errorf("task %s was completed by attempt %d: %w", t.ID, t.Attempt, ErrLeaseLost)
	}
	if err := CheckLease(t, worker, attempt, now); err != nil {
		return 0, err
	}
	t.State = TaskCompleted
	t.Result = output
	t.Metrics = metrics
	t.Error = ""
	t.LeaseExpiresAt = time.Time{}
	t.UpdatedAt = now
	t.FinishedAt = now
	return Completed, nil
}

// Retry ends t's current attempt with reason. While attempts remain (and the
// failure is retryable) t goes back to pending, runnable after wait; otherwise
// it fails for good. It reports whether t failed for good. A retryable
// failure of one of two attempts (Speculate) while the other is live
// leaves t leased to the other.
func Retry(t *Task, reason string, retryable bool, wait time.Duration, now time.Time) (final bool) {
	if retryable && drop(t, reason, now) {
		return false // the other attempt goes on
	}
	settle(t)
	t.Error = reason
	t.LeaseExpiresAt = time.Time{}
	t.UpdatedAt = now
	if retryable && t.Attempt < t.MaxAttempts {
		t.State = TaskPending
		t.RunAfter = now.Add(wait)
		return false
	}
	t.State = TaskFailed
	t.FinishedAt = now
	return true
}

// Release gives t back without holding its attempt against it: a worker
// shutting down hands over a task it could not finish. t goes back to
// pending at once, and a release never fails it: when it held its last
// attempt, MaxAttempts grows by one. When t's other attempt (Speculate)
// is live, t stays leased to it instead.
func Release(t *Task, reason string, now time.Time) {
	if drop(t, reason, now) {
		// The other attempt goes on; the released one's number stays
		// taken, but not against t: its attempts may all be failures yet.
		if n := t.attempts(); n >= t.MaxAttempts {
			t.MaxAttempts = n + 1
		}
		return
	}
	settle(t)
	t.Error = reason
	t.LeaseExpiresAt = time.Time{}
	t.UpdatedAt = now
	t.State = TaskPending
	t.RunAfter = now
	if t.Attempt >= t.MaxAttempts {
		t.MaxAttempts = t.Attempt + 1
	}
}

// Backoff is the wait before retry attempt n+1 after attempt n failed:
// min(2^(n-1) s, 300 s) scaled by 0.5 + jitter/2, jitter in [0, 1].
func Backoff(n int, jitter float64) time.Duration {
	if n < 1 {
		n = 1
	}
	base := 300 * time.Second
	if n <= 9 { // 2^8 s = 256 s < 300 s; 2^9 s > 300 s
		base = min(time.Duration(1<<(n-1))*time.Second, base)
	}
	jitter = math.Max(0, math.Min(1, jitter))
	return time.Duration(float64(base) * (0.5 + jitter/2))
}

// FinishJob moves j to a final status at now, recording why.
func FinishJob(j *Job, status JobStatus, reason string, now time.Time) {
	j.Status = status
	j.Error = reason
	j.UpdatedAt = now
	j.FinishedAt = now
}

// RetryJob makes the failed or cancelled j pending again at now, without
// its error; any other status is ErrConflict, with a message that says
// what can be done instead.
func RetryJob(j *Job, now time.Time) error {
	switch j.Status {
	case JobFailed, JobCancelled:
	case JobCompleted:
		return fmt.Errorf("job %s is completed: only a failed or cancelled job can be retried; its result is at GET /jobs/%s/result: %w", j.ID, j.ID, ErrConflict)
	default:
		return fmt.Errorf("job %s is %s: only a failed or cancelled job can be retried; cancel it first to run its chunks again: %w", j.ID, j.Status, ErrConflict)
	}
	j.Status = JobPending
	j.Error = ""
	j.UpdatedAt = now
	j.FinishedAt = time.Time{}
	return nil
}

// ReopenRoot makes a retried job's stitch root t wait again at now for its
// pending chunks (runnable at once when there are none), with a fresh
// budget of maxAttempts attempts.
func ReopenRoot(t *Task, pending, maxAttempts int, now time.Time) {
	t.State = TaskWaiting
	if pending <= 0 {
		t.State = TaskPending
	}
	t.PendingUpstreams = max(pending, 0)
	t.MaxAttempts = t.Attempt + maxAttempts
	t.Error = ""
	t.LeaseExpiresAt = time.Time{}
	t.RunAfter = now
	t.UpdatedAt = now
	t.FinishedAt = time.Time{}
}
