package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/tests/framework/binary"
)

// waitExit waits for p to exit and fails unless it exits 0 within timeout.
// It returns how long that took.
func waitExit(t *testing.T, p *binary.Proc, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	select {
	case <-p.Exited():
		err := p.Err()
		if err != nil {
			t.Fatalf("worker exited with %v, want 0:\n%s", err, p.Stderr.String())
		}
	case <-time.After(timeout):
		t.Fatalf("worker still runs after %v:\n%s", timeout, p.Stderr.String())
	}
	return time.Since(began)
}

// TestWorkerMaxRuntimeReleases runs a real worker with --max-runtime whose
// deadline comes while its task runs: it kills the command, releases the
// task (pending again at once, not counted: the job allows one attempt
// only, and still completes) and exits 0; another worker then takes the
// task's next lease and the job completes with the exact result.
func TestWorkerMaxRuntimeReleases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 200, 10)
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "10",
		"--chunk-rows", "100", "--lease-seconds", "5", "--max-attempts", "1")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)

	// Before its first claim the worker assumes a lease of 5 s: with 10 s
	// left it claims. Its command would run for 600 s.
	began := time.Now()
	slow := start(t, dir, workerEnv(p.URL), "worker", "--id", "short", "--max-runtime", "10s",
		"--work-dir", filepath.Join(dir, "w1"), "--workload", copyWorkload("sleep 600; "))
	waitExit(t, slow, 30*time.Second)
	ran := time.Since(began)
	if ran < 9*time.Second {
		t.Errorf("the worker with --max-runtime 10s ran only %v", ran)
	}
	t.Logf("the worker exited %v after its start", ran.Round(time.Millisecond))

	var tk taskOut
	call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
	if tk.State != "pending" || tk.Attempt != 1 || tk.MaxAttempts != 2 || !strings.Contains(tk.Error, "released the task at the worker's deadline") {
		t.Fatalf("chunk 0 after the deadline: %+v; want pending again, released (its one attempt not counted: max_attempts 2)", tk)
	}
	if out := slow.Stderr.String(); !strings.Contains(out, "the worker's deadline came") || !strings.Contains(out, "worker stopped") {
		t.Errorf("the worker's log lacks its deadline or its stop:\n%s", out)
	}

	start(t, dir, workerEnv(p.URL), "worker", "--id", "next", "--work-dir", filepath.Join(dir, "w2"), "--workload", copyWorkload(""))
	out := filepath.Join(dir, "out.csv")
	waitCompleted(t, p.URL, jobID, 30*time.Second)
	call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
	if tk.State != "completed" || tk.Attempt != 2 || tk.LeaseOwner != "next" {
		t.Errorf("chunk 0 at the end: %+v; want completed at attempt 2 by next", tk)
	}
	if msg, err := run(t, dir, clientEnv(p.URL), "result", jobID, "--output", out); err != nil {
		t.Fatalf("result: %v %s", err, msg)
	}
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Fatalf("result after a release at the deadline:\n%s\nwant:\n%s", got, want)
	}
}

// TestWorkerMaxRuntimeShorterThanLease runs real workers whose time left is
// shorter than a lease: one with --until 3 s ahead (less than the 5 s it
// assumes before a claim) claims nothing; one with --max-runtime 30s claims
// a task, learns from it that leases are 60 s, claims no second task, and
// exits as soon as the first is done. Both exit 0.
func TestWorkerMaxRuntimeShorterThanLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "table.csv")
	writeScoredTable(t, table, 200, 10)
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "10",
		"--chunk-rows", "100", "--lease-seconds", "60")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)
	tasks := func() (out [2]taskOut) {
		for i := range out {
			call(t, "GET", p.URL+"/tasks/"+jobID+"-"+string(rune('0'+i)), "ctok", nil, &out[i])
		}
		return out
	}

	until := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	idle := start(t, dir, workerEnv(p.URL), "worker", "--id", "idle", "--until", until,
		"--work-dir", filepath.Join(dir, "w1"), "--workload", copyWorkload(""))
	t.Logf("the worker with --until 3 s ahead exited after %v", waitExit(t, idle, 15*time.Second).Round(time.Millisecond))
	if got := tasks(); got[0].Attempt != 0 || got[1].Attempt != 0 {
		t.Fatalf("tasks after a worker with 3 s left: %+v; want neither claimed", got)
	}

	one := start(t, dir, workerEnv(p.URL), "worker", "--id", "once", "--max-runtime", "30s",
		"--work-dir", filepath.Join(dir, "w2"), "--workload", copyWorkload("sleep 1; "))
	took := waitExit(t, one, 25*time.Second)
	t.Logf("the worker with --max-runtime 30s exited after %v", took.Round(time.Millisecond))
	got := tasks()
	done, left := 0, 0
	for _, tk := range got {
		switch {
		case tk.State == "completed" && tk.LeaseOwner == "once":
			done++
		case tk.State == "pending" && tk.Attempt == 0:
			left++
		}
	}
	if done != 1 || left != 1 {
		t.Fatalf("tasks after a worker with 30 s left and leases of 60 s: %+v; want one completed by it, one never claimed", got)
	}

	msg, err := run(t, dir, workerEnv(p.URL), "worker", "--workload", "copy=cat", "--max-runtime", "1m", "--until", until)
	if err == nil || !strings.Contains(msg, "not both") {
		t.Errorf("worker with --max-runtime and --until: %v\n%s", err, msg)
	}
	msg, err = run(t, dir, workerEnv(p.URL), "worker", "--workload", "copy=cat", "--until", "tomorrow")
	if err == nil || !strings.Contains(msg, "RFC 3339") {
		t.Errorf("worker with --until tomorrow: %v\n%s", err, msg)
	}
}

// TestWorkerReleasesOnSIGUSR1 sends SIGUSR1 to a real worker, without a
// deadline, while its task runs: it kills the command, releases the task
// (pending again, the attempt not counted) and exits 0 at once, not after
// a grace period.
func TestWorkerReleasesOnSIGUSR1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "table.csv")
	writeScoredTable(t, table, 10, 1)
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--max-attempts", "1")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)
	running := filepath.Join(dir, "running")
	w := start(t, dir, workerEnv(p.URL), "worker", "--id", "told", "--grace", "10m",
		"--work-dir", filepath.Join(dir, "w"), "--workload", copyWorkload("touch "+running+"; sleep 600; "))
	// The command started, so the worker holds the task: a lease in the
	// database alone may belong to a claim whose answer is still on its way.
	workerWaitFor(t, 20*time.Second, "the task's command to start", func() bool { return fileExists(running) })
	var tk taskOut
	if err := w.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitExit(t, w, 30*time.Second) // well before the 10 min grace
	call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
	if tk.State != "pending" || tk.MaxAttempts != 2 || !strings.Contains(tk.Error, "released the task when told to") {
		t.Fatalf("the task after SIGUSR1: %+v; want pending again, released, its attempt not counted", tk)
	}
}
