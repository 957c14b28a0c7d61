package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Health calls GET /health and returns nil when the coordinator is alive.
func (c *Client) Health(ctx context.Context) error {
	_, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/health"}, nil)
	return err
}

// Upload streams a CSV table from r to POST /upload (without reading it
// into memory) and returns what the coordinator stored. The coordinator
// checks the CSV as it streams and answers 400 naming the line of a bad
// record.
func (c *Client) Upload(ctx context.Context, r io.Reader) (*Upload, error) {
	var up Upload
	_, _, err := c.call(ctx, &request{
		method: http.MethodPost, path: "/upload", body: r, ctype: "text/csv", timeout: -1,
	}, &up)
	if err != nil {
		return nil, err
	}
	return &up, nil
}

// Workload is a workload that connected workers announce.
type Workload struct {
	Name     string    `json:"name"`
	Workers  int       `json:"workers"`   // connected workers that announce it
	LastSeen time.Time `json:"last_seen"` // the latest call of one of them
	Versions []string  `json:"versions"`  // the versions they announce for it
}

// Workloads returns the workloads that the workers seen in the last ten
// minutes announce, by name (GET /workloads): what a job may name and
// find a worker for now.
func (c *Client) Workloads(ctx context.Context) ([]Workload, error) {
	var out struct {
		Workloads []Workload `json:"workloads"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/workloads"}, &out); err != nil {
		return nil, err
	}
	return out.Workloads, nil
}

// CreateJob creates a job with POST /jobs. A non-empty idempotencyKey is sent
// as the Idempotency-Key header: the same key with the same request returns
// the job created the first time, a different request a 409 conflict.
func (c *Client) CreateJob(ctx context.Context, req *JobRequest, idempotencyKey string) (*Job, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var j Job
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/jobs", body: req, header: h}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// GetJob returns a job with its progress.
func (c *Client) GetJob(ctx context.Context, jobID string) (*Job, error) {
	var j Job
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/jobs/" + pathEscape(jobID)}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// WaitJob returns a job once it is final or its progress token differs
// from after, waiting up to wait (at most 60 s) on the coordinator for
// that; when wait passes it returns the job as it is. The coordinator
// waits whole seconds: wait is rounded up, and a wait over 60 s is 60 s.
// With after "" or wait 0 or less it is GetJob.
func (c *Client) WaitJob(ctx context.Context, jobID, after string, wait time.Duration) (*Job, error) {
	secs := min(int((wait+time.Second-1)/time.Second), 60)
	if after == "" || wait <= 0 {
		return c.GetJob(ctx, jobID)
	}
	req := &request{method: http.MethodGet, path: "/jobs/" + pathEscape(jobID),
		query: url.Values{"wait_seconds": {strconv.Itoa(secs)}, "after": {after}}}
	if c.timeout > 0 {
		req.timeout = c.timeout + time.Duration(secs)*time.Second
	}
	var j Job
	if _, _, err := c.call(ctx, req, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// ListOptions selects a page of a list; zero fields are left out.
type ListOptions struct {
	Status string // jobs only: a job status to filter on
	Owner  string // jobs only, for admins: an account whose jobs to list
	State  string // tasks only: a task state to filter on
	Limit  int    // page size; 0 for the coordinator's default
	Cursor string // the NextCursor of the previous page; "" for the first
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.State != "" {
		q.Set("state", o.State)
	}
	if o.Owner != "" {
		q.Set("owner", o.Owner)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// ListJobs returns a page of jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, opts ListOptions) (*JobList, error) {
	if opts.State != "" {
		return nil, fmt.Errorf("list jobs: jobs have a status, not a state; set ListOptions.Status")
	}
	var l JobList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/jobs", query: opts.query()}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// ListTasks returns a page of a job's chunk tasks, by chunk index.
func (c *Client) ListTasks(ctx context.Context, jobID string, opts ListOptions) (*TaskList, error) {
	if opts.Status != "" || opts.Owner != "" {
		return nil, fmt.Errorf("list tasks: tasks have a state and no owner filter; set ListOptions.State")
	}
	var l TaskList
	req := &request{method: http.MethodGet, path: "/jobs/" + pathEscape(jobID) + "/tasks", query: opts.query()}
	if _, _, err := c.call(ctx, req, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Result returns the final CSV of a completed job as a stream; the caller
// closes it. Before the job completes it fails with a 409 not_ready
// (IsNotReady).
func (c *Client) Result(ctx context.Context, jobID string) (io.ReadCloser, error) {
	return c.stream(ctx, &request{method: http.MethodGet, path: "/jobs/" + pathEscape(jobID) + "/result"})
}

// Peek is a look at a job's result before it completes.
type Peek struct {
	CSV         []byte // the best rows over the chunks completed so far; the final CSV once completed
	ChunksDone  int
	ChunksTotal int
}

// PeekResult returns the CSV that the job's chunks completed so far give
// (GET /jobs/{id}/result?partial=true): the final CSV's rows, order and
// format over those chunks alone, or the final CSV once the job is
// completed.
func (c *Client) PeekResult(ctx context.Context, jobID string) (*Peek, error) {
	resp, cancel, err := c.send(ctx, &request{method: http.MethodGet, path: "/jobs/" + pathEscape(jobID) + "/result",
		query: url.Values{"partial": {"true"}}})
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	p := &Peek{}
	if p.CSV, err = io.ReadAll(resp.Body); err != nil {
		return nil, transportError(ctx, "GET /jobs/"+jobID+"/result: read answer", err)
	}
	p.ChunksDone, _ = strconv.Atoi(resp.Header.Get("SciMesh-Chunks-Done"))
	p.ChunksTotal, _ = strconv.Atoi(resp.Header.Get("SciMesh-Chunks-Total"))
	return p, nil
}

// Cancel cancels a job and returns it. Cancelling is idempotent; a job
// already final is returned unchanged.
func (c *Client) Cancel(ctx context.Context, jobID string) (*Job, error) {
	var j Job
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/jobs/" + pathEscape(jobID) + "/cancel"}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Retry runs a failed or cancelled job's unfinished chunks again and
// returns the job, pending again: its failed and cancelled chunks get a
// fresh budget of attempts, its completed chunks are kept. On a job that
// is pending, running or completed it is a 409 conflict (IsConflict).
func (c *Client) Retry(ctx context.Context, jobID string) (*Job, error) {
	var j Job
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/jobs/" + pathEscape(jobID) + "/retry"}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// GetTask returns a task: its claimed-task fields, state, lease owner and
// error.
func (c *Client) GetTask(ctx context.Context, taskID string) (*Task, error) {
	var t Task
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/tasks/" + pathEscape(taskID)}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Logs returns a task's log as text, a line per log line; the caller closes
// it. With follow the stream sends the existing lines, then new ones as
// they come, and ends when the task is final.
func (c *Client) Logs(ctx context.Context, taskID string, follow bool) (io.ReadCloser, error) {
	var q url.Values
	if follow {
		q = url.Values{"follow": {"1"}}
	}
	return c.stream(ctx, &request{method: http.MethodGet, path: "/tasks/" + pathEscape(taskID) + "/logs", query: q})
}
