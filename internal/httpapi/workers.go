package httpapi

import (
	"net/http"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
)

// workerJSON is a worker as GET /workers shows it.
type workerJSON struct {
	ID        string    `json:"id"`      // its own, without its key's prefix
	Account   string    `json:"account"` // its key's; "" for the pool
	Key       string    `json:"key"`     // its key's name; "" for the pool
	Trusted   bool      `json:"trusted"`
	Workloads []string  `json:"workloads"` // none when it takes any
	LastSeen  time.Time `json:"last_seen"`
	TasksDone int64     `json:"tasks_done"`
}

// listWorkers answers GET /workers?limit=&cursor=: the workers the
// coordinators keep, most recently seen first; an account's own keys'
// alone, every worker for an admin.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, next, err := s.engine.ListWorkers(r.Context(), engine.ListWorkersParams{Limit: limit, Cursor: q.Get("cursor")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Workers    []workerJSON `json:"workers"`
		NextCursor *string      `json:"next_cursor"`
	}{Workers: make([]workerJSON, len(ws)), NextCursor: strPtr(next)}
	for i, v := range ws {
		workloads := v.Workloads
		if workloads == nil {
			workloads = []string{}
		}
		out.Workers[i] = workerJSON{ID: v.Name, Account: v.Account, Key: v.Key, Trusted: v.Trusted,
			Workloads: workloads, LastSeen: v.LastSeen, TasksDone: v.TasksDone}
	}
	writeJSON(w, http.StatusOK, out)
}
