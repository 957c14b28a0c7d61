package e2e

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
)

// TestPlainHTTPWarning runs a coordinator on every address and, as real
// processes, a worker and `scimesh submit --wait` (many calls each)
// against it: reached by loopback they say nothing of plain http; reached
// by an address of this machine that is not loopback, each says once that
// its token goes in the clear.
func TestPlainHTTPWarning(t *testing.T) {
	t.Parallel()
	ip := testenv.NonLoopbackIP(t)
	dir := t.TempDir()
	p := serveOn(t, dir, "0.0.0.0:0", tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "db"), "--data-dir", filepath.Join(dir, "data"))
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	remoteHost := net.JoinHostPort(ip, u.Port())
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 200, 5)
	const warning = "sending the token over plain http to "

	for _, c := range []struct {
		name, base string
		warns      bool
	}{
		{"loopback", "http://127.0.0.1:" + u.Port(), false},
		{"localhost", "http://localhost:" + u.Port(), false},
		{"remote", "http://" + remoteHost, true},
	} {
		w := start(t, dir, workerEnv(c.base), "worker", "--id", "w-"+c.name, "--work-dir", filepath.Join(dir, "work-"+c.name),
			"--workload", copyWorkload(""))
		out := filepath.Join(dir, c.name+".csv")
		msg, err := run(t, dir, clientEnv(c.base), "submit", table, "--workload", "copy", "--top-k", "5",
			"--chunk-rows", "50", "--wait", "--output", out)
		if err != nil {
			t.Fatalf("%s: submit --wait: %v\n%s", c.name, err, msg)
		}
		if got, err := os.ReadFile(out); err != nil || string(got) != want {
			t.Fatalf("%s: result %q (%v), want %q", c.name, got, err, want)
		}
		_ = w.Cmd.Process.Kill() // it ran the job's 4 chunks: claims, inputs, results
		w.Wait()
		n, wn := strings.Count(msg, "warning: "+warning+remoteHost+";"), strings.Count(w.Stderr.String(), warning+remoteHost+";")
		switch {
		case c.warns && (n != 1 || wn != 1 || !strings.Contains(msg, "use https")):
			t.Errorf("%s: submit --wait warned %d times and the worker %d; want once each, saying to use https:\n%s\nworker:\n%s",
				c.name, n, wn, msg, w.Stderr.String())
		case !c.warns && (strings.Contains(msg, "plain http") || strings.Contains(w.Stderr.String(), "plain http")):
			t.Errorf("%s: a warning about plain http to loopback:\n%s\nworker:\n%s", c.name, msg, w.Stderr.String())
		}
	}
}

// TestSubmitNamesAndWait runs a coordinator and a worker as real processes:
// `scimesh submit FILE` names the job after FILE unless --name says
// otherwise, and `scimesh wait JOB` follows a job submitted without --wait
// to its result, fails naming the error of a job that failed or was
// cancelled, and finds neither an unknown job nor another account's.
func TestSubmitNamesAndWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w", "--concurrency", "2", "--work-dir", filepath.Join(dir, "work"),
		"--workload", copyWorkload("sleep 0.1; "), "--workload", "broken=echo no such column >&2; exit 3")
	table := filepath.Join(dir, "scores.csv")
	want := writeScoredTable(t, table, 600, 7)
	submit := func(args ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, "ctok", append([]string{"submit", table, "--top-k", "7", "--chunk-rows", "100"}, args...)...)
		if err != nil {
			t.Fatalf("submit %v: %v\n%s", args, err, errOut)
		}
		return strings.TrimSpace(out)
	}
	nameOf := func(id string) string {
		var j struct{ Name string }
		call(t, "GET", p.URL+"/jobs/"+id, "ctok", nil, &j)
		return j.Name
	}

	id := submit("--workload", "copy")
	if got := nameOf(id); got != "scores.csv" {
		t.Errorf("job submitted without --name is named %q, want scores.csv", got)
	}
	if named := submit("--workload", "copy", "--name", "run 2"); nameOf(named) != "run 2" {
		t.Errorf("job submitted with --name 'run 2' is named %q", nameOf(named))
	}

	out := filepath.Join(dir, "out.csv")
	stdout, stderr, err := cli(t, dir, p.URL, "ctok", "wait", id, "--output", out)
	if err != nil || stdout != "" {
		t.Fatalf("wait --output: %v\nstdout %q\nstderr %s", err, stdout, stderr)
	}
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Errorf("wait wrote:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(stderr, "6/6 chunks") || !strings.Contains(stderr, "100%") || !strings.Contains(stderr, "result written to "+out) {
		t.Errorf("wait showed no finished progress bar:\n%s", stderr)
	}
	if stdout, stderr, err := cli(t, dir, p.URL, "ctok", "wait", id); err != nil || stdout != want {
		t.Errorf("wait without --output: %v\nstdout %q\nstderr %s\nwant the result on stdout", err, stdout, stderr)
	}

	failed := submit("--workload", "broken", "--max-attempts", "1")
	_, stderr, err = cli(t, dir, p.URL, "ctok", "wait", failed, "--output", filepath.Join(dir, "failed.csv"))
	if err == nil || !strings.Contains(stderr, "job "+failed+" is failed: ") || !strings.Contains(stderr, "exited with status 3; its last stderr lines:\nno such column") {
		t.Errorf("wait on a failing job: %v\n%s\nwant an error naming the job's error", err, stderr)
	}
	if fileExists(filepath.Join(dir, "failed.csv")) {
		t.Error("wait on a failed job wrote its --output")
	}

	// A job no worker runs, followed while it is cancelled.
	idle := submit("--workload", "idle")
	waiting := start(t, dir, clientEnv(p.URL), "wait", idle)
	workerWaitFor(t, 10*time.Second, "wait to show the job", func() bool { return strings.Contains(waiting.Stderr.String(), "job "+idle+": 6 chunks") })
	if _, errOut, err := cli(t, dir, p.URL, "ctok", "cancel", idle); err != nil {
		t.Fatalf("cancel: %v %s", err, errOut)
	}
	select {
	case <-waiting.Exited():
		err := waiting.Err()
		if err == nil || !strings.Contains(waiting.Stderr.String(), "job "+idle+" is cancelled") {
			t.Errorf("wait on a cancelled job: %v\n%s", err, waiting.Stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("wait did not end when its job was cancelled:\n%s", waiting.Stderr.String())
	}

	bob, errOut, err := cli(t, dir, p.URL, "ctok", "account", "add", "bob")
	if err != nil {
		t.Fatalf("account add: %v %s", err, errOut)
	}
	for _, c := range []struct{ token, job string }{{"ctok", "s0:nope"}, {strings.TrimSpace(bob), id}} {
		stdout, stderr, err := cli(t, dir, p.URL, c.token, "wait", c.job)
		if err == nil || !strings.Contains(stderr, "404 not_found") || stdout != "" {
			t.Errorf("wait %s as %s: %v\nstdout %q\nstderr %s\nwant 404", c.job, c.token, err, stdout, stderr)
		}
	}
}
