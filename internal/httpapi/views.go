package httpapi

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// jobJSON is a job as clients see it.
type jobJSON struct {
	JobID          string            `json:"job_id"`
	Name           string            `json:"name"`
	Owner          string            `json:"owner"`
	Workload       string            `json:"workload"`
	Status         domain.JobStatus  `json:"status"`
	Priority       int               `json:"priority"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	FinishedAt     *time.Time        `json:"finished_at"`
	Error          *string           `json:"error"`
	Progress       float64           `json:"progress"`
	Tasks          domain.TaskCounts `json:"tasks"`
	ProgressToken  string            `json:"progress_token"` // changes as the job progresses; GET /jobs/{id}?after= waits for that
	Parameters     json.RawMessage   `json:"parameters"`
	ChunkRows      int               `json:"chunk_rows"`
	HasHeader      bool              `json:"has_header"`
	TopK           int               `json:"top_k"`
	ScoreColumn    string            `json:"score_column"`
	Order          domain.Order      `json:"order"`
	MaxAttempts    int               `json:"max_attempts"`
	LeaseSeconds   int               `json:"lease_seconds"`
	TimeoutSeconds int               `json:"timeout_seconds"`
	Workers        domain.WorkerMode `json:"workers"`
	Quorum         *int              `json:"quorum"`    // for workers "any" only
	Columns        []string          `json:"columns"`   // [] when none
	IDColumn       *string           `json:"id_column"` // with columns only
	Cache          bool              `json:"cache"`     // whether it uses the chunk cache
	SpeculateAfter float64           `json:"speculate_after"`
	ResultSHA256   *string           `json:"result_sha256"`
}

func jobView(v *engine.JobView) *jobJSON {
	j := v.Job
	out := &jobJSON{
		JobID: j.ID, Name: j.Name, Owner: j.Owner, Workload: j.Workload, Status: j.Status, Priority: j.Priority,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, FinishedAt: timePtr(j.FinishedAt),
		Error: strPtr(j.Error), Progress: v.Tasks.Progress(), Tasks: v.Tasks, ProgressToken: v.ProgressToken(),
		Parameters: j.Parameters, ChunkRows: j.ChunkRows, HasHeader: j.HasHeader, TopK: j.TopK,
		ScoreColumn: j.ScoreColumn, Order: j.Order, MaxAttempts: j.MaxAttempts,
		LeaseSeconds: j.LeaseSeconds, TimeoutSeconds: j.TimeoutSeconds, ResultSHA256: strPtr(j.ResultSHA256),
		Workers: cmp.Or(j.Workers, domain.WorkersTrusted), Columns: j.Columns,
		IDColumn: strPtr(j.IDColumn), Cache: !j.NoCache, SpeculateAfter: j.SpeculateAfter,
	}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	if j.Workers == domain.WorkersAny {
		out.Quorum = &j.Quorum
	}
	return out
}

// inputJSON says where a worker gets a task's input.
type inputJSON struct {
	URL        string `json:"url"`
	SHA256     string `json:"sha256"`
	Bytes      int64  `json:"bytes"`
	Range      string `json:"range,omitempty"`       // of a URL signed into the blob store
	HeaderLine string `json:"header_line,omitempty"` // comes before the range's bytes
}

// taskJSON is a task as workers (the claimed fields) and clients (all) see it.
type taskJSON struct {
	TaskID         string           `json:"task_id"`
	JobID          string           `json:"job_id"`
	ChunkIndex     int              `json:"chunk_index"`
	Attempt        int              `json:"attempt"`
	MaxAttempts    int              `json:"max_attempts"`
	LeaseExpiresAt *time.Time       `json:"lease_expires_at"`
	Workload       string           `json:"workload"`
	Parameters     json.RawMessage  `json:"parameters"`
	TopK           int              `json:"top_k"`
	ScoreColumn    string           `json:"score_column"`
	Order          domain.Order     `json:"order"`
	HasHeader      bool             `json:"has_header"`
	TimeoutSeconds int              `json:"timeout_seconds"` // the worker kills its command after it; 0 for no limit
	Input          inputJSON        `json:"input"`
	State          domain.TaskState `json:"state"`
	LeaseOwner     *string          `json:"lease_owner"`
	Error          *string          `json:"error"`
	CreatedAt      time.Time        `json:"created_at"`
	UpdatedAt      time.Time        `json:"updated_at"`
}

// taskView renders a task. The input of a chunk of an upload is on this
// coordinator, at the relative reference /tasks/{id}/input: the worker
// resolves it against the coordinator URL it uses, so it leads back the
// way the worker came, through any proxy, whatever Host or scheme reached
// the server. An absolute URL built from the request would have to trust
// the Host and X-Forwarded-* headers that a proxy sets (or not) and any
// caller can forge; see "Behind a reverse proxy" in ARCHITECTURE.md.
func taskView(v *engine.TaskView) *taskJSON {
	t := v.Task
	out := &taskJSON{
		TaskID: t.ID, JobID: t.JobID, ChunkIndex: t.ChunkIndex, Attempt: t.Attempt,
		MaxAttempts: t.MaxAttempts, Workload: t.Workload, TimeoutSeconds: t.TimeoutSeconds,
		Input: inputJSON{URL: t.InputURI, SHA256: t.InputSHA256, Bytes: t.InputBytes},
		State: t.State, LeaseOwner: strPtr(t.LeaseOwner), Error: strPtr(t.Error),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Parameters: json.RawMessage("{}"),
	}
	if t.State == domain.TaskLeased {
		out.LeaseExpiresAt = timePtr(t.LeaseExpiresAt)
	}
	switch {
	case v.Input != nil:
		out.Input.URL, out.Input.Range, out.Input.HeaderLine = v.Input.URL, v.Input.Range, string(v.Input.Header)
	case t.InputURI == "" && t.Kind.ScoresRows() && v.Job != nil && v.Job.UploadID != "":
		out.Input.URL = inputPath(t.ID)
	}
	if j := v.Job; j != nil {
		out.Parameters, out.TopK, out.ScoreColumn = j.Parameters, j.TopK, j.ScoreColumn
		out.Order, out.HasHeader = j.Order, j.HasHeader
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// inputPath is where a chunk of an upload is served, relative to the
// coordinator's URL: the claimed task's input.url. Task IDs hold only
// characters a path segment may hold.
func inputPath(taskID string) string { return "/tasks/" + taskID + "/input" }
