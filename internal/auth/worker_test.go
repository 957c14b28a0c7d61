package auth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
)

// TestGuardWorker: the gate hands a worker route the principal it acts
// as — the pool for the worker token, a key's account, name and trust for
// a live worker key, looked up on every request — and refuses a key that
// is no longer there (401), and a key on a client or peer route (403).
func TestGuardWorker(t *testing.T) {
	t.Parallel()
	key := domain.WorkerKeyPrefix + strings.Repeat("a", 64)
	other := domain.WorkerKeyPrefix + strings.Repeat("b", 64)
	laptop := domain.Principal{Account: "ada", Key: "laptop"}
	db := &accounts{byKey: map[string]domain.Principal{key: laptop}}
	g := auth.NewGate(testTokens)
	g.Bind(db)
	open := auth.NewGate(auth.Tokens{})
	open.Bind(db)
	var seen domain.Principal
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = domain.PrincipalOf(r.Context()) })
	deny := func(w http.ResponseWriter, r *http.Request, e *auth.Error) { w.WriteHeader(e.Status) }
	call := func(g *auth.Gate, role auth.Role, token string) int {
		t.Helper()
		seen = domain.Principal{Account: "nobody"}
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		g.Guard(auth.Route{Role: role}, deny, h).ServeHTTP(w, r)
		return w.Code
	}
	if code := call(g, auth.Worker, testTokens.Worker); code != http.StatusOK || seen != domain.PoolPrincipal {
		t.Errorf("worker route with the worker token: %d as %+v; want the trusted pool", code, seen)
	}
	if code := call(g, auth.Worker, key); code != http.StatusOK || seen != laptop {
		t.Errorf("worker route with ada's untrusted key: %d as %+v; want %+v", code, seen, laptop)
	}
	db.byKey[key] = domain.Principal{Account: "ada", Key: "laptop", Trusted: true}
	if code := call(g, auth.Worker, key); code != http.StatusOK || !seen.Trusted {
		t.Errorf("worker route with ada's key once trusted: %d as %+v; want it trusted at once", code, seen)
	}
	for _, c := range []struct {
		name  string
		gate  *auth.Gate
		role  auth.Role
		token string
		want  int
	}{
		{"a key on a client route", g, auth.Client, key, http.StatusForbidden},
		{"a key on a peer route", g, auth.Peer, key, http.StatusForbidden},
		{"an unknown key", g, auth.Worker, other, http.StatusUnauthorized},
		{"an unknown key on a client route", g, auth.Client, other, http.StatusUnauthorized},
		{"the client token on a worker route", g, auth.Worker, testTokens.Client, http.StatusForbidden},
		{"open: an unknown key is the pool", open, auth.Worker, other, http.StatusOK},
	} {
		if code := call(c.gate, c.role, c.token); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	delete(db.byKey, key)
	if code := call(g, auth.Worker, key); code != http.StatusUnauthorized {
		t.Errorf("worker route with ada's key once revoked: %d, want 401 at once", code)
	}
	db.down = true
	if code := call(g, auth.Worker, other); code != http.StatusServiceUnavailable {
		t.Errorf("a key while the database is down: %d, want 503", code)
	}
}
