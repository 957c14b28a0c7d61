package httpapi

import (
	"net/http"
	"time"
)

// workloadJSON is a workload that connected workers announce.
type workloadJSON struct {
	Name     string    `json:"name"`
	Workers  int       `json:"workers"`
	LastSeen time.Time `json:"last_seen"`
	Versions []string  `json:"versions"` // [] when none is announced
}

// listWorkloads answers GET /workloads: the workloads that the workers
// seen lately announce. They are no account's: every client sees them all.
func (s *Server) listWorkloads(w http.ResponseWriter, r *http.Request) {
	ws, err := s.engine.ListWorkloads(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Workloads []workloadJSON `json:"workloads"`
	}{Workloads: make([]workloadJSON, len(ws))}
	for i, v := range ws {
		out.Workloads[i] = workloadJSON{Name: v.Name, Workers: v.Workers, LastSeen: v.LastSeen, Versions: v.Versions}
		if v.Versions == nil {
			out.Workloads[i].Versions = []string{}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
