package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Claim leases one task to req.WorkerID with POST /tasks/claim. It returns
// nil and no error when there is no task (204), after holding up to
// req.WaitSeconds (at most 60) for one to become ready.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (*Task, error) {
	var t Task
	status, h, err := c.call(ctx, c.claimRequest(req, 0), &t)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	t.setDeadline(h, time.Now())
	return &t, nil
}

// ClaimMany leases up to max tasks (1-1000) at once with the batch form of
// POST /tasks/claim. It returns no tasks and no error when there is none.
func (c *Client) ClaimMany(ctx context.Context, req ClaimRequest, max int) ([]Task, error) {
	if max < 1 {
		return nil, fmt.Errorf("claim: max_tasks is %d; ask for 1 to 1000 tasks", max)
	}
	if max == 1 {
		t, err := c.Claim(ctx, req)
		if t == nil || err != nil {
			return nil, err
		}
		return []Task{*t}, nil
	}
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	status, h, err := c.call(ctx, c.claimRequest(req, max), &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	now := time.Now()
	for i := range out.Tasks {
		out.Tasks[i].setDeadline(h, now)
	}
	return out.Tasks, nil
}

func (c *Client) claimRequest(req ClaimRequest, max int) *request {
	body := struct {
		ClaimRequest
		MaxTasks int `json:"max_tasks,omitempty"`
	}{req, max}
	r := &request{method: http.MethodPost, path: "/tasks/claim", body: body}
	if c.timeout > 0 {
		// The coordinator holds the answer for up to the wait.
		r.timeout = c.timeout + time.Duration(req.WaitSeconds*float64(time.Second))
	}
	return r
}

func (t *Task) setDeadline(h http.Header, received time.Time) {
	if t.LeaseExpiresAt != nil {
		t.LeaseDeadline = localDeadline(*t.LeaseExpiresAt, h, received)
	}
}

// Input downloads a claimed task's input from rawURL (the task's
// Input.URL) and returns it as a stream for the caller to read, check
// against Input.SHA256 and close. A relative URL is resolved against the
// coordinator's. The token is sent only when the URL is the one the
// coordinator issues for a task's input (OnCoordinator): input hosted
// anywhere else, even on the coordinator's host under another path, is
// fetched without it, and so is any redirect out of the coordinator's
// base URL.
func (c *Client) Input(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	u, err := c.inputURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("input URL %q: only http and https inputs can be downloaded", rawURL)
	}
	op := "GET " + RedactURL(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	c.authorize(req, c.isTaskInput(u))
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportError(ctx, op, unwrapURLError(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp, op)
	}
	return resp.Body, nil
}

// inputURL resolves a task's input URL as Input does: a relative URL
// against the coordinator's.
func (c *Client) inputURL(rawURL string) (*url.URL, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	ref, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("input URL %q: %w", rawURL, err)
	}
	u := c.base.ResolveReference(ref)
	if ref.Scheme == "" && ref.Host == "" && len(rawURL) > 0 && rawURL[0] == '/' {
		// A path on the coordinator keeps the base's path prefix.
		base := *c.base
		if base.Path == "" {
			base.Path = "/" // else JoinPath makes a relative path
		}
		u = base.JoinPath(ref.EscapedPath())
		u.RawQuery = ref.RawQuery
	}
	return u, nil
}

// OnCoordinator reports whether a task's input URL (resolved as Input
// resolves it) is the one the coordinator issues for a task's input —
// "/tasks/{id}/input" below the coordinator's base URL, on its scheme,
// host and port, without user info, query, or escapes and dot segments
// that a proxy could route elsewhere — where Input sends the token. Input
// anywhere else is the job's, not the coordinator's, even on the
// coordinator's host: a worker may want to check where it leads first.
func (c *Client) OnCoordinator(rawURL string) bool {
	u, err := c.inputURL(rawURL)
	return err == nil && c.isTaskInput(u)
}

// RedactURL shows u without its query and user info, which may hold
// credentials (a pre-signed URL's signature, say), for messages.
func RedactURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	return v.String()
}

// Heartbeat renews the lease (workerID, attempt) of a task and returns its
// new end. A 409 lease_lost (IsLeaseLost) or cancelled (IsCancelled) means
// the worker must stop working on the task.
func (c *Client) Heartbeat(ctx context.Context, taskID, workerID string, attempt int) (Lease, error) {
	var l Lease
	body := map[string]any{"worker_id": workerID, "attempt": attempt}
	_, h, err := c.call(ctx, &request{method: http.MethodPost, path: "/tasks/" + pathEscape(taskID) + "/heartbeat", body: body}, &l)
	if err != nil {
		return Lease{}, err
	}
	l.Deadline = localDeadline(l.ExpiresAt, h, time.Now())
	return l, nil
}

// Complete records the result of a task's attempt and returns the task.
// Sending the same result again for the same attempt is harmless. res.TaskID
// must be empty or taskID.
func (c *Client) Complete(ctx context.Context, taskID string, res Result) (*Task, error) {
	if res.TaskID != "" && res.TaskID != taskID {
		return nil, fmt.Errorf("complete task %s: the result names task %s", taskID, res.TaskID)
	}
	res.TaskID = ""
	var t Task
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/tasks/" + pathEscape(taskID) + "/result", body: res}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// CompleteMany records up to 1000 results at once with POST /tasks/results;
// each must name its TaskID. The items are applied independently: the
// answer has one ResultStatus per item, in order, and the error is for the
// call as a whole.
func (c *Client) CompleteMany(ctx context.Context, results []Result) ([]ResultStatus, error) {
	var out struct {
		Results []struct {
			TaskID string `json:"task_id"`
			Status int    `json:"status"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"results"`
	}
	body := struct {
		Results []Result `json:"results"`
	}{results}
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/tasks/results", body: body}, &out); err != nil {
		return nil, err
	}
	st := make([]ResultStatus, len(out.Results))
	for i, r := range out.Results {
		st[i] = ResultStatus{TaskID: r.TaskID, Status: r.Status}
		if r.Error != nil {
			st[i].Err = &Error{Status: r.Status, Code: r.Error.Code, Message: r.Error.Message, Op: "result of task " + r.TaskID}
		}
	}
	return st, nil
}

// Fail records that a task's attempt failed. A retryable failure puts the
// task back to pending while attempts remain; otherwise the task, and its
// job, fail for good.
func (c *Client) Fail(ctx context.Context, taskID string, f Failure) (*Task, error) {
	var t Task
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/tasks/" + pathEscape(taskID) + "/failure", body: f}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// AppendLogs appends lines to the log of a task's attempt. With
// lines.Offset set, sending the same lines again (after an answer lost on
// the way, say) stores them once.
func (c *Client) AppendLogs(ctx context.Context, taskID string, lines LogLines) error {
	_, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/tasks/" + pathEscape(taskID) + "/logs", body: lines}, nil)
	return err
}
