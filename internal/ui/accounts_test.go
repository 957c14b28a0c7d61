package ui

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

var tokenRe = regexp.MustCompile(`<pre id="token">(scimesh_[0-9a-f]{64})</pre>`)

// postForm posts form with the page's form token to path and returns the
// answer.
func postForm(t *testing.T, c *http.Client, base, path, csrf string, form url.Values) (*http.Response, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if csrf != "" {
		form.Set("csrf", csrf)
	}
	resp, err := c.PostForm(base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAccountsPage: an admin's dashboard links the accounts page, which
// lists the accounts, adds one and shows its token once, changes an
// account's weight and quotas, disables and enables it and issues a new
// token; bad input and a form without its token change nothing. For an
// account that is not an admin the page and its forms do not exist, and
// the nav does not link them. An admin's jobs pages show each job's
// owner; another account's do not.
func TestAccountsPage(t *testing.T) {
	t.Parallel()
	srv, e, _ := setup(t)
	admin := client(t)
	login(t, admin, srv.URL, "ctok")
	_, jobs := get(t, admin, srv.URL+"/ui/jobs")
	if !strings.Contains(jobs, `id="nav-accounts"`) || !strings.Contains(jobs, "<th>Owner</th>") || !strings.Contains(jobs, `<td class="owner">admin</td>`) {
		t.Errorf("an admin's jobs page: no accounts link or owner column:\n%s", jobs)
	}
	resp, page := get(t, admin, srv.URL+"/ui/accounts")
	m := csrfRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(page, `id="account-admin"`) {
		t.Fatalf("the accounts page: %d\n%s", resp.StatusCode, page)
	}
	csrf := m[1]

	// Added, with its token shown once.
	resp, page = postForm(t, admin, srv.URL, "/ui/accounts", csrf, url.Values{"name": {"alice"}, "admin": {"off"}, "weight": {"2"},
		"max_running": {""}, "max_jobs": {"3"}, "max_storage": {"10GiB"}})
	tm := tokenRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || tm == nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("adding alice: %d, %s\n%s", resp.StatusCode, resp.Header.Get("Cache-Control"), page)
	}
	if a, err := e.GetAccount(t.Context(), "alice"); err != nil || a.Weight != 2 || a.MaxJobs != 3 || a.MaxStorage != 10<<30 || a.Admin {
		t.Fatalf("alice as added: %+v, %v", a, err)
	}
	if _, again := get(t, admin, srv.URL+"/ui/accounts"); strings.Contains(again, tm[1]) || !strings.Contains(again, `value="10 GiB"`) {
		t.Errorf("the accounts page shows the token again, or not alice's storage as she has it:\n%s", again)
	}
	alice := client(t)
	if resp := login(t, alice, srv.URL, tm[1]); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logging in with the token shown: %d", resp.StatusCode)
	}

	// Bad input, or no form token: refused, nothing changes.
	for what, c := range map[string]struct {
		path string
		form url.Values
		csrf string
		want int
	}{
		"a bad name":        {"/ui/accounts", url.Values{"name": {"Bad Name"}}, csrf, 400},
		"a taken name":      {"/ui/accounts", url.Values{"name": {"alice"}}, csrf, 409},
		"weight 0":          {"/ui/accounts", url.Values{"name": {"bob"}, "weight": {"0"}}, csrf, 400},
		"a bad size":        {"/ui/accounts", url.Values{"name": {"bob"}, "max_storage": {"lots"}}, csrf, 400},
		"a bad count":       {"/ui/accounts/alice", url.Values{"max_jobs": {"three"}}, csrf, 400},
		"a negative quota":  {"/ui/accounts/alice", url.Values{"max_running": {"-1"}}, csrf, 400},
		"no form token":     {"/ui/accounts/alice", url.Values{"max_jobs": {"9"}}, "", 403},
		"no such account":   {"/ui/accounts/nobody", url.Values{"max_jobs": {"9"}}, csrf, 404},
		"disabling admin":   {"/ui/accounts/admin/disable", nil, csrf, 409},
		"admin not admin":   {"/ui/accounts/admin", url.Values{"admin": {"off"}}, csrf, 409},
		"a token of nobody": {"/ui/accounts/nobody/tokens", nil, csrf, 404},
	} {
		if resp, page := postForm(t, admin, srv.URL, c.path, c.csrf, c.form); resp.StatusCode != c.want || tokenRe.MatchString(page) {
			t.Errorf("%s: %d, want %d\n%s", what, resp.StatusCode, c.want, page)
		}
	}
	list, err := e.ListAccounts(t.Context())
	if err != nil || len(list) != 2 || list[1].Weight != 2 || list[1].MaxJobs != 3 || list[0].Disabled || !list[0].Admin {
		t.Errorf("accounts after the refusals: %+v, %v", list, err)
	}

	// Its row's form: weight and quotas; the built-in admin's row saves.
	resp, _ = postForm(t, admin, srv.URL, "/ui/accounts/alice", csrf, url.Values{"admin": {"off"}, "weight": {"5"}, "max_running": {"4"},
		"max_jobs": {"3"}, "max_storage": {"1.5 KiB"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving alice's row: %d", resp.StatusCode)
	}
	if a, err := e.GetAccount(t.Context(), "alice"); err != nil || a.Weight != 5 || a.MaxRunning != 4 || a.MaxStorage != 1536 || a.Admin {
		t.Errorf("alice after her row was saved: %+v, %v", a, err)
	}
	if resp, page := postForm(t, admin, srv.URL, "/ui/accounts/admin", csrf, url.Values{"admin": {"on"}, "weight": {"3"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("saving the built-in admin's row: %d\n%s", resp.StatusCode, page)
	}

	// Not an admin: no link, no owner column, and the page and its forms
	// do not exist.
	_, aliceJobs := get(t, alice, srv.URL+"/ui/jobs")
	if strings.Contains(aliceJobs, "nav-accounts") || strings.Contains(aliceJobs, "<th>Owner</th>") {
		t.Errorf("alice's jobs page links the accounts page or shows owners:\n%s", aliceJobs)
	}
	am := csrfRe.FindStringSubmatch(aliceJobs)
	if resp, _ := get(t, alice, srv.URL+"/ui/accounts"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the accounts page for alice: %d, want 404", resp.StatusCode)
	}
	for _, path := range []string{"/ui/accounts", "/ui/accounts/alice", "/ui/accounts/alice/tokens", "/ui/accounts/alice/disable"} {
		if resp, _ := postForm(t, alice, srv.URL, path, am[1], url.Values{"name": {"mallory"}, "admin": {"on"}}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s as alice: %d, want 404", path, resp.StatusCode)
		}
	}
	if a, _ := e.GetAccount(t.Context(), "alice"); a.Admin || a.Disabled {
		t.Errorf("alice after her own posts: %+v", a)
	}

	// Disabled, her session ends at once; enabled, her token lets her in.
	if resp, _ := postForm(t, admin, srv.URL, "/ui/accounts/alice/disable", csrf, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disabling alice: %d", resp.StatusCode)
	}
	if resp, _ := get(t, alice, srv.URL+"/ui/jobs"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("alice's session once she is disabled: %d, want 303 to the login page", resp.StatusCode)
	}
	if resp, _ := postForm(t, admin, srv.URL, "/ui/accounts/alice/enable", csrf, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("enabling alice: %d", resp.StatusCode)
	}
	if resp := login(t, alice, srv.URL, tm[1]); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("alice's token once she is enabled: %d", resp.StatusCode)
	}

	// A new token with the others revoked: shown once; the old one ends
	// her session and logs no one in.
	resp, page = postForm(t, admin, srv.URL, "/ui/accounts/alice/tokens", csrf, url.Values{"revoke_others": {"on"}})
	nm := tokenRe.FindStringSubmatch(page)
	if resp.StatusCode != 200 || nm == nil || nm[1] == tm[1] || !strings.Contains(page, "its other tokens are revoked") {
		t.Fatalf("a new token of alice: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := get(t, alice, srv.URL+"/ui/jobs"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("alice's session with her revoked token: %d, want 303 to the login page", resp.StatusCode)
	}
	if resp := login(t, client(t), srv.URL, tm[1]); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("logging in with a revoked token: %d, want 401", resp.StatusCode)
	}
	if _, err := e.Authenticate(t.Context(), nm[1]); err != nil {
		t.Errorf("the new token: %v", err)
	}

	// Her jobs, on an admin's jobs page, show her as their owner.
	j, _, err := e.CreateJob(domain.WithCaller(t.Context(), domain.Caller{Account: "alice"}), &domain.JobSpec{Workload: "w", Parameters: []byte("{}"),
		Chunks: []domain.ChunkRef{{URI: "https://x.org/a", SHA256: strings.Repeat("0", 64)}}, ChunkRows: 10, HasHeader: true, TopK: 1,
		ScoreColumn: "score", Order: domain.Desc, MaxAttempts: 3, LeaseSeconds: 60}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, jobs := get(t, admin, srv.URL+"/ui/jobs"); !strings.Contains(jobs, `<td class="owner">alice</td>`) {
		t.Errorf("the admin's jobs page does not show alice's job as hers:\n%s", jobs)
	}
	if _, p := get(t, admin, srv.URL+"/ui/jobs/"+url.PathEscape(j.ID)); !strings.Contains(p, `<span id="owner">alice</span>`) {
		t.Errorf("the admin's page of alice's job does not name her:\n%s", p)
	}
}
