package client

import (
	"context"
	"net/http"
	"time"
)

// Account is an account as the coordinator shows it: Usage when it was
// read alone (GetAccount, Account), Token once, when it was just created.
type Account struct {
	Name       string        `json:"name"`
	Admin      bool          `json:"admin"`
	Disabled   bool          `json:"disabled"`
	Weight     int           `json:"weight"`
	MaxRunning int           `json:"max_running"`
	MaxJobs    int           `json:"max_jobs"`
	MaxStorage int64         `json:"max_storage"`
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
	Usage      *AccountUsage `json:"usage,omitempty"`
	Token      string        `json:"token,omitempty"`
}

// AccountUsage is what an account uses now, which its quotas bound.
type AccountUsage struct {
	Running      int   `json:"running"`       // its leased tasks
	Jobs         int   `json:"jobs"`          // its unfinished jobs
	StorageBytes int64 `json:"storage_bytes"` // the bytes of its uploads
}

// AccountSettings are an account's settings a request gives; nil ones are
// left out (the defaults of a new account, or kept by a change).
type AccountSettings struct {
	Admin      *bool  `json:"admin,omitempty"`
	Disabled   *bool  `json:"disabled,omitempty"` // only in a change
	Weight     *int   `json:"weight,omitempty"`
	MaxRunning *int   `json:"max_running,omitempty"`
	MaxJobs    *int   `json:"max_jobs,omitempty"`
	MaxStorage *int64 `json:"max_storage,omitempty"`
}

// CreateAccount creates account name with POST /accounts (admins) and
// returns it with its first token, which the coordinator shows this once.
// s.Disabled must be nil.
func (c *Client) CreateAccount(ctx context.Context, name string, s AccountSettings) (*Account, error) {
	body := struct {
		Name string `json:"name"`
		AccountSettings
	}{name, s}
	var a Account
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/accounts", body: body}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListAccounts returns every account, by name (admins).
func (c *Client) ListAccounts(ctx context.Context) ([]*Account, error) {
	var out struct {
		Accounts []*Account `json:"accounts"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/accounts"}, &out); err != nil {
		return nil, err
	}
	return out.Accounts, nil
}

// GetAccount returns account name with its current use (admins).
func (c *Client) GetAccount(ctx context.Context, name string) (*Account, error) {
	var a Account
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/accounts/" + pathEscape(name)}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Account returns the caller's own account with its current use.
func (c *Client) Account(ctx context.Context) (*Account, error) {
	var a Account
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/account"}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UpdateAccount changes the settings of account name that s gives and
// returns the account as it is now (admins).
func (c *Client) UpdateAccount(ctx context.Context, name string, s AccountSettings) (*Account, error) {
	var a Account
	if _, _, err := c.call(ctx, &request{method: http.MethodPatch, path: "/accounts/" + pathEscape(name), body: s}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// IssueToken makes a new token of account name and returns it; with
// revokeOthers every other token of the account is revoked (admins).
func (c *Client) IssueToken(ctx context.Context, name string, revokeOthers bool) (string, error) {
	body := struct {
		RevokeOthers bool `json:"revoke_others"`
	}{revokeOthers}
	var out struct {
		Token string `json:"token"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: "/accounts/" + pathEscape(name) + "/tokens", body: body}, &out); err != nil {
		return "", err
	}
	return out.Token, nil
}
