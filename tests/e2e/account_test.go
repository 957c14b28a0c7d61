package e2e

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// cli runs `scimesh args…` as a client of url with token and returns its
// standard output and error apart.
func cli(t *testing.T, dir, url, token string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(scimesh, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SCIMESH_COORDINATOR=" + url, "SCIMESH_TOKEN=" + token}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// dashboard is a browser's session on a coordinator's dashboard.
type dashboard struct {
	t   *testing.T
	url string
	hc  *http.Client
}

// login starts a dashboard session with token.
func login(t *testing.T, base, token string) *dashboard {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &dashboard{t: t, url: base, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, err := d.hc.PostForm(base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/jobs"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/jobs" {
		t.Fatalf("log in to the dashboard: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return d
}

// in reports whether the session still opens the jobs page (else the
// dashboard sends it to the login page).
func (d *dashboard) in() bool {
	d.t.Helper()
	resp, err := d.hc.Get(d.url + "/ui/jobs")
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return true
	case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/ui/login"):
		return false
	}
	d.t.Fatalf("the jobs page: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	return false
}

// TestAccountCommands runs `scimesh account …` against a real
// coordinator: an admin adds, lists, shows and changes accounts and
// issues tokens, each printed once; bad input is refused with a clear
// error and changes nothing; a non-admin may only show its own account.
// A token rotated with --revoke-others, and every token of a disabled
// account, is refused at once on REST, on the RPC services and on the
// dashboard, where the session it started ends; enabled again, the
// account's live token works again.
func TestAccountCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	admin := func(args ...string) (string, string, error) { return cli(t, dir, p.URL, "ctok", args...) }
	must := func(out, errOut string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%v: %s%s", err, out, errOut)
		}
		return out
	}
	tokenRe := regexp.MustCompile(`^scimesh_[0-9a-f]{64}\n$`)

	out, errOut, err := admin("account", "add", "alice", "--weight", "2", "--max-jobs", "1", "--max-storage", "1KiB")
	if err != nil || !tokenRe.MatchString(out) || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("account add: %v\nstdout %q\nstderr %q; want the token alone on stdout", err, out, errOut)
	}
	alice := strings.TrimSpace(out)
	list := must(admin("account", "list"))
	if !regexp.MustCompile(`(?m)^alice\s+no\s+no\s+2\s+none\s+1\s+1 KiB\s`).MatchString(list) || !strings.Contains(list, "admin ") {
		t.Errorf("account list:\n%s", list)
	}
	show := must(admin("account", "show", "alice"))
	for _, want := range []string{"weight       2", "max_jobs     1 (0 unfinished now)", "max_storage  1 KiB (0 B used now)", "max_running  none (0 running now)"} {
		if !strings.Contains(show, want) {
			t.Errorf("account show alice lacks %q:\n%s", want, show)
		}
	}
	if own := must(cli(t, dir, p.URL, alice, "account", "show")); !strings.Contains(own, "name         alice") {
		t.Errorf("account show with alice's token:\n%s", own)
	}
	set := must(admin("account", "set", "alice", "--max-jobs", "2", "--max-storage", "2KiB"))
	if !strings.Contains(set, "max_jobs     2") || !strings.Contains(set, "max_storage  2 KiB") || !strings.Contains(set, "weight       2") {
		t.Errorf("account set alice --max-jobs 2 --max-storage 2KiB:\n%s", set)
	}

	// Refusals, each with a reason, changing nothing.
	for _, c := range []struct {
		token string
		args  []string
		want  string
	}{
		{alice, []string{"account", "list"}, "403 permission_denied"},
		{alice, []string{"account", "disable", "alice"}, "needs an admin's token"},
		{alice, []string{"account", "add", "mallory"}, "403 permission_denied"},
		{alice, []string{"account", "set", "alice", "--admin"}, "403 permission_denied"},
		{alice, []string{"account", "token", "alice"}, "403 permission_denied"},
		{"ctok", []string{"account", "add", "Bad"}, "400 invalid_argument"},
		{"ctok", []string{"account", "add", "alice"}, "409 conflict"},
		{"ctok", []string{"account", "add", "bob", "--weight", "0"}, "400 invalid_argument"},
		{"ctok", []string{"account", "set", "alice"}, "nothing to change"},
		{"ctok", []string{"account", "set", "alice", "--max-storage", "10XB"}, "--max-storage"},
		{"ctok", []string{"account", "show", "nobody"}, "404 not_found"},
		{"ctok", []string{"account", "disable", "admin"}, "409 conflict"},
		{"ctok", []string{"account", "token"}, "takes one argument"},
	} {
		out, errOut, err := cli(t, dir, p.URL, c.token, c.args...)
		if err == nil || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("scimesh %v: %v\nstdout %q\nstderr %q; want a failure saying %q", c.args, err, out, errOut, c.want)
		}
	}
	if list2 := must(admin("account", "list")); strings.Count(list2, "\n") != 3 || strings.Contains(list2, "mallory") || strings.Contains(list2, "bob") {
		t.Errorf("accounts after the refusals:\n%s", list2)
	}

	// A quota refuses what would pass it, saying which.
	big := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(big, []byte("id,x\n"+strings.Repeat("row,1\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := cli(t, dir, p.URL, alice, "submit", big, "--workload", "w"); err == nil || !strings.Contains(errOut, "429 quota_exceeded") || !strings.Contains(errOut, "max_storage") {
		t.Errorf("submit past max_storage: %v\n%s", err, errOut)
	}

	// Where alice's token works now: REST, RPC, a dashboard session.
	works := func(what, token string, want bool, d *dashboard) {
		t.Helper()
		rest := call(t, "GET", p.URL+"/jobs", token, nil, nil)
		q := scimeshv1connect.NewQueueClient(http.DefaultClient, p.URL, withToken(token))
		_, rpcErr := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: "s0:none"}))
		rpcIn := connect.CodeOf(rpcErr) == connect.CodeNotFound // past the gate, the task is not there
		if want && (rest != 200 || !rpcIn || !d.in()) {
			t.Errorf("%s: REST %d, RPC %v, dashboard in %v; want it let in everywhere", what, rest, rpcErr, d.in())
		}
		if !want && (rest != 401 || connect.CodeOf(rpcErr) != connect.CodeUnauthenticated || d.in()) {
			t.Errorf("%s: REST %d, RPC %v, dashboard in %v; want it refused everywhere at once", what, rest, rpcErr, d.in())
		}
	}
	first := login(t, p.URL, alice)
	works("alice's first token", alice, true, first)

	out = must(admin("account", "token", "alice", "--revoke-others"))
	if !tokenRe.MatchString(out) {
		t.Fatalf("account token --revoke-others printed %q", out)
	}
	rotated := strings.TrimSpace(out)
	works("alice's first token, revoked", alice, false, first)
	second := login(t, p.URL, rotated)
	works("alice's new token", rotated, true, second)

	must(admin("account", "disable", "alice"))
	works("a disabled account's token", rotated, false, second)
	resp, err := http.PostForm(p.URL+"/ui/login", url.Values{"token": {rotated}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("logging in with a disabled account's token: %d, want 401", resp.StatusCode)
	}
	must(admin("account", "enable", "alice"))
	works("alice's token, her account enabled again", rotated, true, login(t, p.URL, rotated))
	works("alice's first token, still revoked", alice, false, first)
}

// TestJobsOwner: `scimesh jobs` and `status` show each job's owner; an
// admin's --owner lists one account's jobs, and an account sees only its
// own.
func TestJobsOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	run := func(token string, args ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, token, args...)
		if err != nil {
			t.Fatalf("scimesh %v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}
	table := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(table, []byte("id,x\na,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		token := strings.TrimSpace(run("ctok", "account", "add", name))
		jobs[name] = strings.TrimSpace(run(token, "submit", table, "--workload", "w"))
		if st := run(token, "status", jobs[name]); !regexp.MustCompile(`(?m)^owner\s+` + name + `$`).MatchString(st) {
			t.Errorf("%s's status of her job:\n%s", name, st)
		}
		mine := run(token, "jobs")
		if !strings.Contains(mine, "OWNER") || strings.Count(mine, "\n") != 2 || !regexp.MustCompile(regexp.QuoteMeta(jobs[name])+`\s+`+name+`\s`).MatchString(mine) {
			t.Errorf("%s's jobs:\n%s\nwant her one job, with her name as its owner", name, mine)
		}
	}
	all := run("ctok", "jobs")
	for name, id := range jobs {
		if !regexp.MustCompile(regexp.QuoteMeta(id) + `\s+` + name + `\s`).MatchString(all) {
			t.Errorf("the admin's jobs lack %s's job %s:\n%s", name, id, all)
		}
	}
	if bobs := run("ctok", "jobs", "--owner", "bob"); strings.Count(bobs, "\n") != 2 || !strings.Contains(bobs, jobs["bob"]) {
		t.Errorf("jobs --owner bob:\n%s\nwant bob's one job", bobs)
	}
}
