package httpapi_test

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/auth"
)

// account is the JSON of an account as the tests read it.
type account struct {
	Name       string `json:"name"`
	Admin      bool   `json:"admin"`
	Disabled   bool   `json:"disabled"`
	Weight     int    `json:"weight"`
	MaxRunning int    `json:"max_running"`
	MaxJobs    int    `json:"max_jobs"`
	MaxStorage int64  `json:"max_storage"`
	Token      string `json:"token"`
	Usage      *struct {
		Running      int   `json:"running"`
		Jobs         int   `json:"jobs"`
		StorageBytes int64 `json:"storage_bytes"`
	} `json:"usage"`
}

// TestAccountRoutes: an admin creates, lists, reads and changes accounts
// and issues their tokens; a token is shown once and works at once; a
// non-admin gets 403 on every /accounts route and reads its own account
// with its use; an unknown name is 404; bad names and values are 400 and
// change nothing; a token rotated with revoke_others, and a disabled
// account's, are refused at once, and enabling the account again lets
// its token in.
func TestAccountRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: auth.Tokens{Client: "client-token", Worker: "worker-token"}})
	cl := "client-token"

	var alice account
	b.mustStatus(b.do("POST", "/accounts", cl, map[string]any{"name": "alice", "weight": 2, "max_jobs": 3, "max_storage": 1 << 30}), 201).decode(t, &alice)
	if alice.Name != "alice" || alice.Weight != 2 || alice.MaxJobs != 3 || alice.MaxStorage != 1<<30 || alice.Admin || !strings.HasPrefix(alice.Token, "scimesh_") {
		t.Fatalf("created %+v; want alice, weight 2, her quotas, and a token", alice)
	}
	var got account
	b.mustStatus(b.do("GET", "/accounts/alice", cl, nil), 200).decode(t, &got)
	if got.Token != "" || got.Usage == nil || got.Weight != 2 {
		t.Errorf("GET /accounts/alice: %+v; want her settings and use, and no token: it is shown once", got)
	}
	var list struct{ Accounts []account }
	b.mustStatus(b.do("GET", "/accounts", cl, nil), 200).decode(t, &list)
	if len(list.Accounts) != 2 || list.Accounts[0].Name != "admin" || list.Accounts[1].Name != "alice" || list.Accounts[1].Token != "" {
		t.Errorf("GET /accounts: %+v; want admin and alice, without tokens", list.Accounts)
	}

	// Her token works at once; she reads her own account with its use.
	b.mustStatus(b.do("POST", "/jobs", alice.Token, jobBody(2, nil)), 201)
	var own account
	b.mustStatus(b.do("GET", "/account", alice.Token, nil), 200).decode(t, &own)
	if own.Name != "alice" || own.Usage == nil || own.Usage.Jobs != 1 || own.MaxJobs != 3 {
		t.Errorf("GET /account as alice: %+v; want alice with 1 unfinished job of 3", own)
	}

	// Not an admin: 403 on every /accounts route, and nothing changes.
	for _, r := range []struct{ method, path string }{
		{"POST", "/accounts"}, {"GET", "/accounts"}, {"GET", "/accounts/alice"}, {"GET", "/accounts/nobody"},
		{"PATCH", "/accounts/alice"}, {"POST", "/accounts/alice/tokens"},
	} {
		var body any
		switch r.method {
		case "POST":
			body = map[string]any{"name": "mallory", "admin": true}
		case "PATCH":
			body = map[string]any{"admin": true}
		}
		if resp := b.do(r.method, r.path, alice.Token, body); resp.status != 403 || resp.errCode() != "permission_denied" {
			t.Errorf("%s %s as alice: %v, want 403 permission_denied", r.method, r.path, resp)
		}
	}

	// Unknown names, bad names and values: nothing changes.
	for _, r := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"GET", "/accounts/nobody", nil, 404},
		{"PATCH", "/accounts/nobody", map[string]any{"weight": 1}, 404},
		{"POST", "/accounts/nobody/tokens", nil, 404},
		{"POST", "/accounts", map[string]any{"name": "alice"}, 409},
		{"POST", "/accounts", map[string]any{"name": "Bad Name"}, 400},
		{"POST", "/accounts", map[string]any{"name": ""}, 400},
		{"POST", "/accounts", map[string]any{"name": "bob", "weight": 0}, 400},
		{"POST", "/accounts", map[string]any{"name": "bob", "max_storage": -1}, 400},
		{"POST", "/accounts", map[string]any{"name": "bob", "max_jobs": 1 << 40}, 400},
		{"POST", "/accounts", map[string]any{"name": "bob", "weight": "heavy"}, 400},
		{"PATCH", "/accounts/alice", map[string]any{"weight": 2_000_000, "max_jobs": 9}, 400},
		{"PATCH", "/accounts/alice", map[string]any{"max_running": -1}, 400},
		{"PATCH", "/accounts/alice", map[string]any{"name": "eve"}, 400},
		{"PATCH", "/accounts/admin", map[string]any{"disabled": true}, 409},
		{"PATCH", "/accounts/admin", map[string]any{"admin": false}, 409},
	} {
		if resp := b.do(r.method, r.path, cl, r.body); resp.status != r.status {
			t.Errorf("%s %s %v: %v, want %d", r.method, r.path, r.body, resp, r.status)
		}
	}
	b.mustStatus(b.do("GET", "/accounts", cl, nil), 200).decode(t, &list)
	if len(list.Accounts) != 2 || list.Accounts[1].Weight != 2 || list.Accounts[1].MaxJobs != 3 || !list.Accounts[0].Admin || list.Accounts[0].Disabled {
		t.Errorf("accounts after the refusals: %+v; want admin and alice as they were", list.Accounts)
	}

	// A change keeps what it does not name.
	b.mustStatus(b.do("PATCH", "/accounts/alice", cl, map[string]any{"max_running": 4}), 200).decode(t, &got)
	if got.MaxRunning != 4 || got.Weight != 2 || got.MaxJobs != 3 {
		t.Errorf("after PATCH max_running: %+v; want max_running 4, the rest kept", got)
	}

	// A second token works beside the first; a third with revoke_others
	// leaves only itself.
	var second, third struct{ Account, Token string }
	b.mustStatus(b.do("POST", "/accounts/alice/tokens", cl, nil), 201).decode(t, &second)
	for _, tok := range []string{alice.Token, second.Token} {
		b.mustStatus(b.do("GET", "/account", tok, nil), 200)
	}
	b.mustStatus(b.do("POST", "/accounts/alice/tokens", cl, map[string]any{"revoke_others": true}), 201).decode(t, &third)
	for _, tok := range []string{alice.Token, second.Token} {
		if r := b.do("GET", "/jobs", tok, nil); r.status != 401 {
			t.Errorf("a token revoked a moment ago: %v, want 401", r)
		}
	}
	b.mustStatus(b.do("GET", "/jobs", third.Token, nil), 200)

	// Disabled: refused at once; enabled: let in again.
	b.mustStatus(b.do("PATCH", "/accounts/alice", cl, map[string]any{"disabled": true}), 200)
	if r := b.do("GET", "/jobs", third.Token, nil); r.status != 401 {
		t.Errorf("a disabled account's token: %v, want 401", r)
	}
	b.mustStatus(b.do("PATCH", "/accounts/alice", cl, map[string]any{"disabled": false}), 200)
	b.mustStatus(b.do("GET", "/jobs", third.Token, nil), 200)

	// Made an admin, she manages accounts.
	b.mustStatus(b.do("PATCH", "/accounts/alice", cl, map[string]any{"admin": true}), 200)
	b.mustStatus(b.do("GET", "/accounts", third.Token, nil), 200)
}
