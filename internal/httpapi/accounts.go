package httpapi

import (
	"net/http"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// Accounts: admins manage them (the engine refuses anyone else with 403);
// GET /account is any caller's own.

// accountJSON is an account as clients see it: Usage when it is read
// alone, Token once, when it was just made.
type accountJSON struct {
	Name       string       `json:"name"`
	Admin      bool         `json:"admin"`
	Disabled   bool         `json:"disabled"`
	Weight     int          `json:"weight"`
	MaxRunning int          `json:"max_running"`
	MaxJobs    int          `json:"max_jobs"`
	MaxStorage int64        `json:"max_storage"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	Usage      *accountUsed `json:"usage,omitempty"`
	Token      string       `json:"token,omitempty"`
}

// accountUsed is what an account uses now, which its quotas bound.
type accountUsed struct {
	Running      int   `json:"running"`
	Jobs         int   `json:"jobs"`
	StorageBytes int64 `json:"storage_bytes"`
}

func accountView(a *domain.Account, u *engine.AccountUsage) *accountJSON {
	out := &accountJSON{
		Name: a.Name, Admin: a.Admin, Disabled: a.Disabled, Weight: a.Weight,
		MaxRunning: a.MaxRunning, MaxJobs: a.MaxJobs, MaxStorage: a.MaxStorage, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
	}
	if u != nil {
		out.Usage = &accountUsed{Running: u.Running, Jobs: u.Jobs, StorageBytes: u.StorageBytes}
	}
	return out
}

// accountSettings are the settings a request may give an account; absent
// ones are nil.
type accountSettings struct {
	Admin      *bool  `json:"admin"`
	Weight     *int   `json:"weight"`
	MaxRunning *int   `json:"max_running"`
	MaxJobs    *int   `json:"max_jobs"`
	MaxStorage *int64 `json:"max_storage"`
}

// createAccountRequest is the body of POST /accounts.
type createAccountRequest struct {
	Name string `json:"name"`
	accountSettings
}

// updateAccountRequest is the body of PATCH /accounts/{name}.
type updateAccountRequest struct {
	accountSettings
	Disabled *bool `json:"disabled"`
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request) {
	if err := engine.RequireAdmin(r.Context()); err != nil { // before the body is read
		s.writeError(w, r, err)
		return
	}
	var req createAccountRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Weight != nil && *req.Weight == 0 { // the engine takes 0 for the default
		s.writeError(w, r, domain.Invalidf("weight 0: use 1 to %d, or leave it out for 1", domain.MaxAccountWeight))
		return
	}
	a, token, err := s.engine.CreateAccount(r.Context(), domain.Account{
		Name: req.Name, Admin: orDefault(req.Admin, false), Weight: orDefault(req.Weight, 1),
		MaxRunning: orDefault(req.MaxRunning, 0), MaxJobs: orDefault(req.MaxJobs, 0), MaxStorage: orDefault(req.MaxStorage, 0),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := accountView(a, nil)
	out.Token = token
	w.Header().Set("Location", "/accounts/"+a.Name)
	w.Header().Set("Cache-Control", "no-store") // the token is shown once
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request) {
	list, err := s.engine.ListAccounts(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Accounts []*accountJSON `json:"accounts"`
	}{Accounts: make([]*accountJSON, len(list))}
	for i, a := range list {
		out.Accounts[i] = accountView(a, nil)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getAccount(w http.ResponseWriter, r *http.Request) {
	v, err := s.engine.GetAccount(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, accountView(v.Account, v.Usage))
}

func (s *Server) ownAccount(w http.ResponseWriter, r *http.Request) {
	v, err := s.engine.CallerAccount(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, accountView(v.Account, v.Usage))
}

func (s *Server) updateAccount(w http.ResponseWriter, r *http.Request) {
	if err := engine.RequireAdmin(r.Context()); err != nil { // before the body is read
		s.writeError(w, r, err)
		return
	}
	var req updateAccountRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.engine.UpdateAccount(r.Context(), r.PathValue("name"), engine.AccountChange{
		Admin: req.Admin, Disabled: req.Disabled, Weight: req.Weight,
		MaxRunning: req.MaxRunning, MaxJobs: req.MaxJobs, MaxStorage: req.MaxStorage,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, accountView(a, nil))
}

// issueTokenRequest is the body of POST /accounts/{name}/tokens, which
// may be left out.
type issueTokenRequest struct {
	RevokeOthers bool `json:"revoke_others"`
}

func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	if err := engine.RequireAdmin(r.Context()); err != nil { // before the body is read
		s.writeError(w, r, err)
		return
	}
	var req issueTokenRequest
	if err := decodeOptional(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	token, err := s.engine.IssueToken(r.Context(), name, req.RevokeOthers)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store") // the token is shown once
	writeJSON(w, http.StatusCreated, map[string]string{"account": name, "token": token})
}
