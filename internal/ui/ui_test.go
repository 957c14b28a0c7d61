package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/topology"
)

// setup serves the dashboard of a real engine on SQLite, with a client
// token, and returns it with one job of three hosted chunks.
func setup(t *testing.T) (*httptest.Server, *engine.Engine, string) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ui.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	blobs, err := blob.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(s, engine.Config{Logger: log, Blobs: blobs})
	u, err := New(e, Config{Gate: auth.NewGate(auth.Tokens{Client: "ctok"}), Logger: log, MaxUpload: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	chunks := make([]domain.ChunkRef, 3)
	for i := range chunks {
		chunks[i] = domain.ChunkRef{URI: "https://x.org/" + strconv.Itoa(i), SHA256: strings.Repeat("0", 64)}
	}
	j, _, err := e.CreateJob(t.Context(), &domain.JobSpec{Workload: "w", Parameters: json.RawMessage("{}"), Chunks: chunks,
		ChunkRows: 10, HasHeader: true, TopK: 1, ScoreColumn: "score", Order: domain.Desc, MaxAttempts: 3, LeaseSeconds: 60}, "")
	if err != nil {
		t.Fatal(err)
	}
	return srv, e, j.ID
}

// client does not follow redirects, so that tests see them.
func client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func login(t *testing.T, c *http.Client, base, token string) *http.Response {
	t.Helper()
	resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/workers"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestLogin(t *testing.T) {
	t.Parallel()
	srv, _, _ := setup(t)
	c := client(t)
	resp, _ := get(t, c, srv.URL+"/ui/jobs?status=running")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/jobs?status=running") {
		t.Fatalf("jobs without a session: %d to %q, want the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := login(t, c, srv.URL, "wrong"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %d with cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
	resp = login(t, c, srv.URL, "ctok")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/workers" {
		t.Fatalf("login: %d to %q, want the page asked for", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Cookies()
	if len(ck) != 1 || ck[0].Name != auth.SessionCookie || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/ui/" {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path /ui/", ck)
	}
	if ck[0].Secure {
		t.Errorf("session cookie over plain HTTP is Secure: the browser would never send it back")
	}
	if resp, _ := get(t, c, srv.URL+"/ui/jobs"); resp.StatusCode != http.StatusOK {
		t.Fatalf("jobs with a session: %d", resp.StatusCode)
	}
	// Behind a proxy that ends TLS, the cookie is for HTTPS only.
	req, _ := http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {"ctok"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ck := resp.Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("session cookie behind an HTTPS proxy %+v, want Secure", ck)
	}

	// A forged or expired session is no session, nor one signed right
	// but never started in the database.
	expired := signedSession(t, "ctok", time.Now().Add(-time.Minute))
	unrecorded := signedSession(t, "ctok", time.Now().Add(time.Hour))
	for _, v := range []string{ck[0].Value + "0", "99999999999.abc", "99999999999.abc.def", expired, unrecorded} {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/jobs", nil)
		req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: v})
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("session %q admitted: %d", v, resp.StatusCode)
		}
	}
	// A session signed with another token's key is no session either.
	req, _ = http.NewRequest("GET", srv.URL+"/ui/jobs", nil)
	forged := signedSession(t, "other", time.Now().Add(time.Hour))
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: forged})
	if resp, _ := client(t).Do(req); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a session of another token admitted: %d", resp.StatusCode)
	}
	// The client token as a bearer token works without a session.
	req, _ = http.NewRequest("GET", srv.URL+"/ui/workers", nil)
	req.Header.Set("Authorization", "Bearer ctok")
	if resp, _ := client(t).Do(req); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer client token: %d", resp.StatusCode)
	}
	// Login from another site, or to a page outside the dashboard, is refused.
	req, _ = http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader("token=ctok"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := client(t).Do(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", resp.StatusCode)
	}
	resp, err = client(t).PostForm(srv.URL+"/ui/login", url.Values{"token": {"ctok"}, "next": {"//evil.example/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Location") != "/ui/jobs" {
		t.Errorf("login redirected to %q, want /ui/jobs instead of another site", resp.Header.Get("Location"))
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestCancelNeedsTheFormsToken(t *testing.T) {
	t.Parallel()
	srv, e, job := setup(t)
	c := client(t)
	login(t, c, srv.URL, "ctok")
	_, page := get(t, c, srv.URL+"/ui/jobs/"+job)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("job page has no form token:\n%s", page)
	}
	cancelURL := srv.URL + "/ui/jobs/" + job + "/cancel"
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", cancelURL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":       {url.Values{}, ""},
		"wrong token":    {url.Values{"csrf": {strings.Repeat("0", 64)}}, ""},
		"another origin": {url.Values{"csrf": {m[1]}}, "http://evil.example"},
	} {
		if code := post(tc.form, tc.origin); code != http.StatusForbidden {
			t.Errorf("cancel with %s: %d, want 403", name, code)
		}
		if j, _ := e.GetJob(t.Context(), job); j.Status != domain.JobPending {
			t.Fatalf("cancel with %s changed the job to %s", name, j.Status)
		}
	}
	if code := post(url.Values{"csrf": {m[1]}}, srv.URL); code != http.StatusSeeOther {
		t.Fatalf("cancel with the form's token: %d, want 303", code)
	}
	if j, _ := e.GetJob(t.Context(), job); j.Status != domain.JobCancelled {
		t.Fatalf("job after cancel: %s", j.Status)
	}
	// Its live view now ends at once.
	resp, body := get(t, c, srv.URL+"/ui/jobs/"+job+"/events")
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, `"status":"cancelled"`) || !strings.HasSuffix(body, "event: done\ndata: {}\n\n") {
		t.Fatalf("events of a cancelled job: %s\n%s", resp.Header.Get("Content-Type"), body)
	}
}

func TestPagesOfMissingThings(t *testing.T) {
	t.Parallel()
	srv, _, _ := setup(t)
	c := client(t)
	login(t, c, srv.URL, "ctok")
	for _, p := range []string{"/ui/jobs/s0:nope", "/ui/tasks/s0:nope", "/ui/trees/s0:nope", "/ui/jobs/s0:nope/result"} {
		resp, body := get(t, c, srv.URL+p)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "s0:nope") {
			t.Errorf("%s: %d, want 404 naming what is missing:\n%s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/ui/jobs?status=bogus"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("jobs with a bad status filter: %d, want 400", resp.StatusCode)
	}
}

// TestShardsPage: the topology's shards with whether each answers, and
// links to tasks on other shards go to their coordinator's dashboard.
func TestShardsPage(t *testing.T) {
	t.Parallel()
	_, e, _ := setup(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
		}
	}))
	t.Cleanup(up.Close)
	// This coordinator's own shard (s0) answers since it serves the page,
	// whatever its URL and whatever Host the request came with (a proxy's).
	topo, err := topology.Parse("static:s0=https://behind-a-proxy.invalid,s1=" + up.URL + ",s2=http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(e, Config{Topology: topo, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	resp, body := get(t, client(t), srv.URL+"/ui/shards")
	if resp.StatusCode != 200 {
		t.Fatalf("shards page: %d", resp.StatusCode)
	}
	rows := regexp.MustCompile(`(?s)<tr class="peer">.*?</tr>`).FindAllString(body, -1)
	if len(rows) != 3 || !strings.Contains(rows[0], "s0") || !strings.Contains(rows[0], "this coordinator") ||
		!strings.Contains(rows[1], "s1") || !strings.Contains(rows[1], ">yes<") ||
		!strings.Contains(rows[2], "s2") || !strings.Contains(rows[2], ">no<") || !strings.Contains(rows[2], "does not answer") {
		t.Fatalf("peer rows %q, want s0 this coordinator, s1 answering and s2 not", rows)
	}
	if got := u.peerTaskURL("s2:abc"); got != "http://127.0.0.1:1/ui/tasks/s2:abc" {
		t.Fatalf("link to a task on s2: %q", got)
	}
}

// TestRetryButton shows the retry button only on a failed or cancelled
// job's page, and retries the job with the form's token only.
func TestRetryButton(t *testing.T) {
	t.Parallel()
	srv, e, job := setup(t)
	c := client(t)
	login(t, c, srv.URL, "ctok")
	if _, page := get(t, c, srv.URL+"/ui/jobs/"+job); strings.Contains(page, `id="retry"`) {
		t.Fatalf("a pending job's page has a retry button:\n%s", page)
	}
	if _, err := e.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	_, page := get(t, c, srv.URL+"/ui/jobs/"+job)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `action="/ui/jobs/`+url.PathEscape(job)+`/retry"`) {
		t.Fatalf("a cancelled job's page has no retry form:\n%s", page)
	}
	post := func(form url.Values) int {
		req, _ := http.NewRequest("POST", srv.URL+"/ui/jobs/"+job+"/retry", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(url.Values{"csrf": {strings.Repeat("0", 64)}}); code != http.StatusForbidden {
		t.Errorf("retry with a wrong form token: %d, want 403", code)
	}
	if j, _ := e.GetJob(t.Context(), job); j.Status != domain.JobCancelled {
		t.Fatalf("retry with a wrong form token changed the job to %s", j.Status)
	}
	if code := post(url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("retry with the form's token: %d, want 303", code)
	}
	if j, _ := e.GetJob(t.Context(), job); j.Status != domain.JobPending || j.Tasks.Pending != j.Tasks.Total {
		t.Fatalf("job after retry: %s, tasks %+v; want pending with every chunk pending", j.Status, j.Tasks)
	}
	// A pending job cannot be retried: the dashboard says why.
	if code := post(url.Values{"csrf": {m[1]}}); code != http.StatusConflict {
		t.Errorf("retry of a pending job: %d, want 409", code)
	}
}

// TestLogoutEndsTheSession: after logging out, the session's cookie,
// sent again, is no session, in this replica and in another on the same
// database.
func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	replica := func() *httptest.Server {
		s, err := sqlite.Open(t.Context(), filepath.Join(dir, "ui.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		u, err := New(engine.New(s, engine.Config{Logger: log}), Config{Gate: auth.NewGate(auth.Tokens{Client: "ctok"}), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(u)
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := replica(), replica()
	c := client(t)
	resp := login(t, c, a.URL, "ctok")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d with cookies %v", resp.StatusCode, resp.Cookies())
	}
	session := resp.Cookies()[0].Value
	with := func(srv *httptest.Server) int {
		req, _ := http.NewRequest("GET", srv.URL+"/ui/jobs", nil)
		req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: session})
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if sa, sb := with(a), with(b); sa != http.StatusOK || sb != http.StatusOK {
		t.Fatalf("the session before logging out: %d here, %d on the other replica; want 200", sa, sb)
	}
	_, page := get(t, c, a.URL+"/ui/jobs")
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the jobs page has no form token:\n%s", page)
	}
	resp, err := c.PostForm(a.URL+"/ui/logout", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("logout: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if sa, sb := with(a), with(b); sa != http.StatusSeeOther || sb != http.StatusSeeOther {
		t.Errorf("the session's cookie sent again after logging out: %d here, %d on the other replica; want both sent to the login (303)", sa, sb)
	}
}

// TestLoginLimit: fifty wrong tokens in a row from one address are
// answered 401 for the first few and 429 with Retry-After for the rest,
// and while the address waits even the right token is not looked at;
// another address logs in at once.
func TestLoginLimit(t *testing.T) {
	t.Parallel()
	srv, _, _ := setup(t)
	counts := map[int]int{}
	var retry string
	for range 50 {
		resp := login(t, client(t), srv.URL, "wrong")
		counts[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retry = resp.Header.Get("Retry-After")
		}
	}
	if counts[http.StatusUnauthorized] > loginBurst+1 || counts[http.StatusTooManyRequests] < 50-loginBurst-1 || retry == "" {
		t.Errorf("50 wrong tokens: %v (Retry-After %q), want at most %d answered 401 and the rest 429 with Retry-After", counts, retry, loginBurst+1)
	}
	if resp := login(t, client(t), srv.URL, "ctok"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right token from an address that must wait: %d, want 429", resp.StatusCode)
	}
	// 127.0.0.2 is this machine too, but another address.
	other := client(t)
	other.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	if resp := login(t, other, srv.URL, "ctok"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the right token from another address: %d, want 303", resp.StatusCode)
	}
}

// TestLoginLimiter: the allowance refills with time, and the addresses
// remembered are bounded.
func TestLoginLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	l := newLoginLimiter()
	l.now = func() time.Time { return now }
	for i := range loginBurst {
		if d := l.wait("a"); d != 0 {
			t.Fatalf("wrong login %d of the burst must wait %v", i+1, d)
		}
		l.failed("a")
	}
	if d := l.wait("a"); d != loginRefill {
		t.Fatalf("after the burst: wait %v, want %v", d, loginRefill)
	}
	if d := l.wait("b"); d != 0 {
		t.Errorf("another address waits %v", d)
	}
	now = now.Add(loginRefill)
	if d := l.wait("a"); d != 0 {
		t.Errorf("after a refill: wait %v, want none", d)
	}
	l.failed("a")
	if d := l.wait("a"); d != loginRefill {
		t.Errorf("a wrong login after the refill: wait %v, want %v again", d, loginRefill)
	}
	for i := range loginAddrs + 10 {
		l.failed(strconv.Itoa(i))
	}
	if len(l.full) > loginAddrs {
		t.Errorf("%d addresses remembered, want at most %d", len(l.full), loginAddrs)
	}
}

// signedSession is the cookie of a session that the dashboard of client
// token token would sign, until exp, but never recorded in its database.
func signedSession(t *testing.T, token string, exp time.Time) string {
	t.Helper()
	s := auth.NewSessions(token)
	s.SetRegistry(nowhere{})
	v, err := s.Start(t.Context(), exp, domain.Caller{Account: domain.AdminAccount, Admin: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// nowhere is a session registry that records nothing.
type nowhere struct{}

func (nowhere) StartSession(context.Context, string, string, string, time.Time) error { return nil }
func (nowhere) SessionCaller(context.Context, string) (domain.Caller, bool, error) {
	return domain.Caller{}, false, nil
}
func (nowhere) EndSession(context.Context, string) error { return nil }
