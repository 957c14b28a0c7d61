package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
)

// accounts is an in-memory database of accounts and sessions for the
// gate's unit tests.
type accounts struct {
	byToken map[string]*domain.Account
	byKey   map[string]domain.Principal
	down    bool
}

func (a *accounts) AuthenticateWorker(_ context.Context, key string) (domain.Principal, error) {
	if a.down {
		return domain.Principal{}, errors.New("connection refused")
	}
	if p, ok := a.byKey[key]; ok {
		return p, nil
	}
	return domain.Principal{}, domain.ErrUnauthenticated
}

func (a *accounts) Authenticate(_ context.Context, token string) (*domain.Account, error) {
	if a.down {
		return nil, errors.New("connection refused")
	}
	if acc, ok := a.byToken[token]; ok {
		return acc, nil
	}
	return nil, domain.ErrUnauthenticated
}

func (a *accounts) StartSession(context.Context, string, string, string, time.Time) error { return nil }
func (a *accounts) SessionCaller(context.Context, string) (domain.Caller, bool, error) {
	return domain.Caller{}, false, nil
}
func (a *accounts) EndSession(context.Context, string) error { return nil }

// TestCallerOf: who each token acts as on a client route, and what each
// wrong one is told.
func TestCallerOf(t *testing.T) {
	t.Parallel()
	adaToken := domain.AccountTokenPrefix + strings.Repeat("a", 64)
	db := &accounts{byToken: map[string]*domain.Account{adaToken: {Name: "ada"}}}
	admin := domain.Caller{Account: domain.AdminAccount, Admin: true}
	ada := domain.Caller{Account: "ada"}
	unknownAccount := domain.AccountTokenPrefix + strings.Repeat("b", 64)

	unbound := auth.NewGate(testTokens)
	if _, e := unbound.CallerOf(t.Context(), adaToken); e == nil || e.Status != http.StatusServiceUnavailable {
		t.Errorf("an account's token before the database answered: %+v, want 503", e)
	}
	if c, e := unbound.CallerOf(t.Context(), testTokens.Client); e != nil || c != admin {
		t.Errorf("the client token before the database answered: %+v, %+v; want the admin", c, e)
	}

	g := auth.NewGate(testTokens)
	g.Bind(db)
	open := auth.NewGate(auth.Tokens{})
	open.Bind(db)
	for _, c := range []struct {
		gate   *auth.Gate
		name   string
		token  string
		want   domain.Caller
		status int
	}{
		{g, "client token", testTokens.Client, admin, 0},
		{g, "account token", adaToken, ada, 0},
		{g, "no token", "", domain.Caller{}, http.StatusUnauthorized},
		{g, "unknown token", "nope", domain.Caller{}, http.StatusUnauthorized},
		{g, "unknown account token", unknownAccount, domain.Caller{}, http.StatusUnauthorized},
		{g, "worker token", testTokens.Worker, domain.Caller{}, http.StatusForbidden},
		{g, "peer token", testTokens.Peer, domain.Caller{}, http.StatusForbidden},
		{open, "open: no token", "", admin, 0},
		{open, "open: any token", "whatever", admin, 0},
		{open, "open: an account's token", adaToken, ada, 0},
		{open, "open: an unknown account token", unknownAccount, admin, 0},
	} {
		got, e := c.gate.CallerOf(t.Context(), c.token)
		switch {
		case c.status == 0 && (e != nil || got != c.want):
			t.Errorf("%s: %+v, %+v; want %+v", c.name, got, e, c.want)
		case c.status != 0 && (e == nil || e.Status != c.status):
			t.Errorf("%s: %+v, %+v; want %d", c.name, got, e, c.status)
		}
	}
	db.down = true
	if _, e := g.CallerOf(t.Context(), adaToken); e == nil || e.Status != http.StatusServiceUnavailable {
		t.Errorf("an account's token while the database is down: %+v, want 503", e)
	}
}

// TestGuardCaller: the gate hands a client route who it acts as, and
// refuses an account's token on a worker route as a token of the wrong
// role (403).
func TestGuardCaller(t *testing.T) {
	t.Parallel()
	adaToken := domain.AccountTokenPrefix + strings.Repeat("a", 64)
	g := auth.NewGate(testTokens)
	g.Bind(&accounts{byToken: map[string]*domain.Account{adaToken: {Name: "ada"}}})
	var seen domain.Caller
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = domain.CallerOf(r.Context()) })
	deny := func(w http.ResponseWriter, r *http.Request, e *auth.Error) { w.WriteHeader(e.Status) }
	call := func(rt auth.Route, token string) int {
		t.Helper()
		seen = domain.Caller{}
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.Guard(rt, deny, h).ServeHTTP(w, r)
		return w.Code
	}
	if code := call(auth.Route{Role: auth.Client}, adaToken); code != http.StatusOK || seen != (domain.Caller{Account: "ada"}) {
		t.Errorf("client route with ada's token: %d as %+v", code, seen)
	}
	if code := call(auth.Route{Role: auth.Client, Session: true}, adaToken); code != http.StatusOK || seen != (domain.Caller{Account: "ada"}) {
		t.Errorf("dashboard route with ada's token: %d as %+v", code, seen)
	}
	if code := call(auth.Route{Role: auth.Worker}, adaToken); code != http.StatusForbidden {
		t.Errorf("worker route with ada's token: %d, want 403", code)
	}
	if code := call(auth.Route{Role: auth.Worker}, domain.AccountTokenPrefix+strings.Repeat("c", 64)); code != http.StatusUnauthorized {
		t.Errorf("worker route with an unknown account token: %d, want 401", code)
	}
}
