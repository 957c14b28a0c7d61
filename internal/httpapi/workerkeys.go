package httpapi

import (
	"net/http"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// Worker keys: any account enrols its own machines; an admin trusts them
// (the engine answers another account's key with 404 to anyone else).

// workerKeyJSON is a worker key as clients see it: Key once, when it was
// just made.
type workerKeyJSON struct {
	Account   string    `json:"account"`
	Name      string    `json:"name"`
	Trusted   bool      `json:"trusted"`
	CreatedAt time.Time `json:"created_at"`
	Key       string    `json:"key,omitempty"`
}

func workerKeyView(k *domain.WorkerKey) *workerKeyJSON {
	return &workerKeyJSON{Account: k.Account, Name: k.Name, Trusted: k.Trusted, CreatedAt: k.CreatedAt}
}

func (s *Server) createWorkerKey(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	k, key, err := s.engine.CreateWorkerKey(r.Context(), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := workerKeyView(k)
	out.Key = key
	w.Header().Set("Cache-Control", "no-store") // the key is shown once
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listWorkerKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.engine.ListWorkerKeys(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		WorkerKeys []*workerKeyJSON `json:"worker_keys"`
	}{WorkerKeys: make([]*workerKeyJSON, len(list))}
	for i, k := range list {
		out.WorkerKeys[i] = workerKeyView(k)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeWorkerKey(w http.ResponseWriter, r *http.Request) {
	n, err := s.engine.RevokeWorkerKey(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Released int `json:"released"`
	}{n})
}

func (s *Server) trustWorkerKey(w http.ResponseWriter, r *http.Request) {
	account, name := r.PathValue("account"), r.PathValue("name")
	if err := engine.MayTrustWorkerKey(r.Context(), account, name); err != nil { // before the body is read
		s.writeError(w, r, err)
		return
	}
	var req struct {
		Trusted *bool `json:"trusted"`
	}
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Trusted == nil {
		s.writeError(w, r, domain.Invalidf(`send {"trusted": true} or {"trusted": false}`))
		return
	}
	k, err := s.engine.TrustWorkerKey(r.Context(), account, name, *req.Trusted)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, workerKeyView(k))
}
