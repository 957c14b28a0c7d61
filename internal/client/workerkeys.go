package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// WorkerKey is a key an account enrols one of its machines with. Key is
// set once, in the answer that made it.
type WorkerKey struct {
	Account   string    `json:"account"`
	Name      string    `json:"name"`
	Trusted   bool      `json:"trusted"`
	CreatedAt time.Time `json:"created_at"`
	Key       string    `json:"key,omitempty"`
}

// CreateWorkerKey makes a worker key name of the caller's account; the
// answer's Key is shown this once.
func (c *Client) CreateWorkerKey(ctx context.Context, name string) (*WorkerKey, error) {
	body := struct {
		Name string `json:"name"`
	}{name}
	var k WorkerKey
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/worker-keys", body: body}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListWorkerKeys returns the caller's worker keys (an admin's: everyone's).
func (c *Client) ListWorkerKeys(ctx context.Context) ([]*WorkerKey, error) {
	var out struct {
		WorkerKeys []*WorkerKey `json:"worker_keys"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/worker-keys"}, &out); err != nil {
		return nil, err
	}
	return out.WorkerKeys, nil
}

// RevokeWorkerKey revokes the caller's worker key name and returns how
// many leases of its workers went back to pending.
func (c *Client) RevokeWorkerKey(ctx context.Context, name string) (int, error) {
	var out struct {
		Released int `json:"released"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodDelete, path: "/worker-keys/" + pathEscape(name)}, &out); err != nil {
		return 0, err
	}
	return out.Released, nil
}

// TrustWorkerKey sets whether the worker key name of account is trusted
// (admins).
func (c *Client) TrustWorkerKey(ctx context.Context, account, name string, trusted bool) (*WorkerKey, error) {
	body := struct {
		Trusted bool `json:"trusted"`
	}{trusted}
	var k WorkerKey
	path := "/worker-keys/" + pathEscape(account) + "/" + pathEscape(name)
	if _, _, err := c.call(ctx, &request{method: http.MethodPatch, path: path, body: body}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// Worker is a worker as the coordinators last saw it.
type Worker struct {
	ID        string    `json:"id"`        // its own, without its key's prefix
	Account   string    `json:"account"`   // its key's account; "" for the pool
	Key       string    `json:"key"`       // its key's name; "" for the pool
	Trusted   bool      `json:"trusted"`   // the pool's are; a key's while an admin trusts it
	Workloads []string  `json:"workloads"` // none when it takes any
	LastSeen  time.Time `json:"last_seen"`
	TasksDone int64     `json:"tasks_done"`
}

// WorkerList is a page of workers, most recently seen first; NextCursor
// is "" on the last page.
type WorkerList struct {
	Workers    []Worker `json:"workers"`
	NextCursor string   `json:"next_cursor"`
}

// ListWorkers returns a page of the workers seen lately: those of the
// caller's own worker keys, or every worker for an admin. Only
// opts.Limit and opts.Cursor apply.
func (c *Client) ListWorkers(ctx context.Context, opts ListOptions) (*WorkerList, error) {
	if opts.Status != "" || opts.State != "" || opts.Owner != "" {
		return nil, fmt.Errorf("list workers: workers have no status, state or owner filter; set ListOptions.Limit and Cursor only")
	}
	var l WorkerList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/workers", query: opts.query()}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
