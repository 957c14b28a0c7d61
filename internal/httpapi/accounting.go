package httpapi

import (
	"net/http"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
)

// usageJSON is one group of GET /usage: the fields grouped by are set,
// the others left out (worker_account "" is the installation's pool, so
// an empty value is shown when it was asked for).
type usageJSON struct {
	Account       *string `json:"account,omitempty"`
	Workload      *string `json:"workload,omitempty"`
	Day           *string `json:"day,omitempty"`
	WorkerAccount *string `json:"worker_account,omitempty"`
	Tasks         int64   `json:"tasks"`
	WorkerSeconds float64 `json:"worker_seconds"`
}

// listUsage answers GET /usage?since=&until=&by=.
func (s *Server) listUsage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := engine.ParseListUsage(q.Get("since"), q.Get("until"), q.Get("by"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	entries, err := s.engine.ListUsage(r.Context(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Usage []usageJSON `json:"usage"`
	}{Usage: make([]usageJSON, len(entries))}
	for i, u := range entries {
		v := usageJSON{Tasks: u.Tasks, WorkerSeconds: u.WorkerSeconds}
		for _, f := range p.By {
			switch f {
			case engine.UsageAccount:
				v.Account = &u.Account
			case engine.UsageWorkload:
				v.Workload = &u.Workload
			case engine.UsageDay:
				v.Day = &u.Day
			case engine.UsageWorkerAccount:
				v.WorkerAccount = &u.WorkerAccount
			}
		}
		out.Usage[i] = v
	}
	writeJSON(w, http.StatusOK, out)
}

// auditJSON is one entry of GET /audit.
type auditJSON struct {
	Time    time.Time `json:"time"`
	Account string    `json:"account"`
	Action  string    `json:"action"`
	Target  string    `json:"target"`
	Detail  string    `json:"detail"`
}

// listAudit answers GET /audit?since=&limit=&cursor=.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := engine.ParseInstant("since", q.Get("since"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	entries, next, err := s.engine.ListAudit(r.Context(), engine.ListAuditParams{Since: since, Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Entries    []auditJSON `json:"entries"`
		NextCursor *string     `json:"next_cursor"`
	}{Entries: make([]auditJSON, len(entries)), NextCursor: strPtr(next)}
	for i, a := range entries {
		out.Entries[i] = auditJSON{Time: a.At.UTC(), Account: a.Account, Action: a.Action, Target: a.Target, Detail: a.Detail}
	}
	writeJSON(w, http.StatusOK, out)
}
