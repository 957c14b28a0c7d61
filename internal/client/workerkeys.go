package client

import (
	"context"
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
