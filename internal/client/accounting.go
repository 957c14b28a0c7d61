package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// UsageOptions selects GET /usage; empty fields are left out.
type UsageOptions struct {
	Since string // an RFC 3339 time or a date; "" from the oldest kept
	Until string // the same, excluded; "" up to now
	By    string // comma-separated fields: account, workload, day, worker_account; "" for account
}

// Usage is the worker time of one group: the fields grouped by are set,
// the others nil.
type Usage struct {
	Account       *string `json:"account,omitempty"`
	Workload      *string `json:"workload,omitempty"`
	Day           *string `json:"day,omitempty"`
	WorkerAccount *string `json:"worker_account,omitempty"` // "" for the installation's own workers
	Tasks         int64   `json:"tasks"`                    // attempts that ended
	WorkerSeconds float64 `json:"worker_seconds"`           // their leased time
}

// Usage returns the worker time charged to the caller's jobs (an
// admin's: everyone's), summed as opts says.
func (c *Client) Usage(ctx context.Context, opts UsageOptions) ([]Usage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"since": opts.Since, "until": opts.Until, "by": opts.By} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Usage []Usage `json:"usage"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/usage", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Usage, nil
}

// AuditOptions selects a page of GET /audit; zero fields are left out.
type AuditOptions struct {
	Since  string // an RFC 3339 time or a date
	Limit  int    // page size; 0 for the coordinator's default
	Cursor string // the NextCursor of the previous page; "" for the first
}

// AuditEntry is one entry of the audit trail.
type AuditEntry struct {
	Time    time.Time `json:"time"`
	Account string    `json:"account,omitempty"` // "" for the coordinator itself
	Action  string    `json:"action"`
	Target  string    `json:"target"`
	Detail  string    `json:"detail"`
}

// AuditList is a page of the audit trail, newest first; NextCursor is ""
// on the last page.
type AuditList struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor"`
}

// Audit returns a page of the audit trail; only an admin may read it.
func (c *Client) Audit(ctx context.Context, opts AuditOptions) (*AuditList, error) {
	q := url.Values{}
	if opts.Since != "" {
		q.Set("since", opts.Since)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	var l AuditList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/audit", query: q}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
