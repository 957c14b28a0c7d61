package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// TestWorkerProcess runs real `scimesh serve` and `scimesh worker`
// processes: the worker completes a job, then gets SIGTERM while a long
// task runs, kills it after the grace period, reports it so that it is
// pending again at once (its lease had a minute left), and exits 0.
func TestWorkerProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "data", "scimesh.db"))

	chunk := "id,value\na,1\nb,3\n"
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(chunk))
	}))
	defer data.Close()
	sum := sha256.Sum256([]byte(chunk))
	input := map[string]any{"chunks": []map[string]any{{"uri": data.URL + "/c0.csv", "sha256": hex.EncodeToString(sum[:])}}}

	pids := t.TempDir()
	w := start(t, dir, []string{"SCIMESH_COORDINATOR=" + p.URL, "SCIMESH_TOKEN=wtok"},
		"worker", "--id", "w1", "--grace", "300ms", "--work-dir", filepath.Join(dir, "work"),
		"--allow-input-host", "127.0.0.1/32", // the data server's address: loopback is refused by default
		"--workload", "copy=sed s/value/score/",
		"--workload", "sleep=echo $$ > "+pids+"/sh; sleep 60 & echo $! > "+pids+"/child; wait")

	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "copy", "top_k": 1, "input": input}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	workerWaitFor(t, 20*time.Second, "the copy job to complete", func() bool {
		var got jobOut
		call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		return got.Status == "completed"
	})
	var res string
	workerGetText(t, p.URL+"/jobs/"+j.JobID+"/result", &res)
	if res != "id,score\nb,3\n" {
		t.Fatalf("result %q", res)
	}

	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "sleep", "lease_seconds": 60, "input": input}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var sh, child int
	workerWaitFor(t, 20*time.Second, "the sleep command to start", func() bool {
		sh, child = workerReadPID(pids+"/sh"), workerReadPID(pids+"/child")
		return sh > 0 && child > 0
	})
	if err := w.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	select {
	case <-w.Exited():
		err := w.Err()
		if err != nil {
			t.Fatalf("worker exited with %v after SIGTERM, want 0:\n%s", err, w.Stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("worker still runs 15s after SIGTERM:\n%s", w.Stderr.String())
	}
	t.Logf("worker exited %v after SIGTERM", time.Since(began).Round(time.Millisecond))

	var tasks struct{ Tasks []map[string]any }
	call(t, "GET", p.URL+"/jobs/"+j.JobID+"/tasks", "ctok", nil, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Fatalf("tasks: %+v", tasks)
	}
	tk := tasks.Tasks[0]
	if tk["state"] != "pending" || tk["attempt"] != float64(1) || !strings.Contains(fmt.Sprint(tk["error"]), "grace period") {
		t.Fatalf("task after SIGTERM: %+v; want pending again at once, with the reason", tk)
	}
	for _, pid := range []int{sh, child} {
		if workerAlive(pid) {
			t.Errorf("process %d of the killed command still runs", pid)
		}
	}
	if out := w.Stderr.String(); !strings.Contains(out, "the grace period ran out") || !strings.Contains(out, "worker stopped") {
		t.Errorf("worker log lacks the shutdown:\n%s", out)
	}
}

// TestWorkerKilledLeavesNoProcess runs a real `scimesh worker` whose
// command leaves processes behind in every way a shell can — in its
// process group, in a session of its own (setsid), and orphaned after a
// double fork — then kills the worker with SIGKILL: within seconds none of
// them runs. The worker, restarted, removes the task's leftover directory.
func TestWorkerKilledLeavesNoProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "data", "scimesh.db"))
	chunk := "id,value\na,1\n"
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(chunk))
	}))
	defer data.Close()
	sum := sha256.Sum256([]byte(chunk))
	input := map[string]any{"chunks": []map[string]any{{"uri": data.URL + "/c0.csv", "sha256": hex.EncodeToString(sum[:])}}}

	// Sleeps of about 1000 s whose arguments name this test's processes.
	var marks []string
	for i := range 3 {
		marks = append(marks, fmt.Sprintf("1000.%d%d%d", os.Getpid(), time.Now().UnixNano()%1e6, i))
	}
	command := fmt.Sprintf("sleep %s & setsid sleep %s & (setsid sleep %s &); wait", marks[0], marks[1], marks[2])
	work := filepath.Join(dir, "work")
	args := []string{"worker", "--id", "w1", "--work-dir", work, "--allow-input-host", "127.0.0.1/32", "--workload", "hold=" + command}
	w := start(t, dir, workerEnv(p.URL), args...)
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "hold", "input": input}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	workerWaitFor(t, 20*time.Second, "the command's three sleeps to start", func() bool {
		return len(workerProcsWith(marks...)) == 3
	})
	leftover, _ := filepath.Glob(filepath.Join(work, "s0:*"))
	if len(leftover) != 1 {
		t.Fatalf("task directories while the task runs: %q, want one", leftover)
	}

	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.Wait()
	killed := time.Now()
	workerWaitFor(t, 5*time.Second, "every process of the killed worker's command to end", func() bool {
		return len(workerProcsWith(marks...)) == 0
	})
	t.Logf("all gone %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))

	again := start(t, dir, workerEnv(p.URL), "worker", "--id", "w2", "--work-dir", work, "--workload", "other=cat")
	workerWaitFor(t, 20*time.Second, "the restarted worker to remove the leftover directory", func() bool {
		_, err := os.Stat(leftover[0])
		return errors.Is(err, os.ErrNotExist)
	})
	// The line is written after the removal: wait for it, too.
	workerWaitFor(t, 5*time.Second, "the restarted worker's log to say it removed the leftover", func() bool {
		return strings.Contains(again.Stderr.String(), "removed a leftover task directory")
	})
}

// TestWorkerHostedLongLine runs a real `scimesh worker` with the built-in
// tanimoto on two hosted chunks whose third line does not end: one that
// goes on without end (its size not given, so --max-input-bytes, 320 MiB
// here, cuts it), and one whose line is 256 MiB long, its size and sha256
// given. Both fail for good at their first attempt, the second saying the
// line is too long, and the worker's peak resident memory (VmHWM) stays
// far below the lines' length: it never holds more than a few MiB of one.
func TestWorkerHostedLongLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "data", "scimesh.db"))
	const head, lineBytes = "id,fingerprint\na,ff\n", 256 << 20
	long := func(w io.Writer) error { // head, then a line of lineBytes
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		x := bytes.Repeat([]byte("x"), 1<<20)
		for range lineBytes >> 20 {
			if _, err := w.Write(x); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, "\n")
		return err
	}
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/long.csv" {
			_ = long(w)
			return
		}
		_, _ = io.WriteString(w, head)
		x := bytes.Repeat([]byte("x"), 1<<20)
		for r.Context().Err() == nil {
			if _, err := w.Write(x); err != nil {
				return
			}
		}
	}))
	defer data.Close()
	sum := sha256.New()
	if err := long(sum); err != nil {
		t.Fatal(err)
	}
	chunks := map[string]map[string]any{
		"endless": {"uri": data.URL + "/endless.csv", "sha256": strings.Repeat("ab", 32)},
		"long":    {"uri": data.URL + "/long.csv", "sha256": hex.EncodeToString(sum.Sum(nil)), "bytes": len(head) + lineBytes + 1},
	}
	w := start(t, dir, workerEnv(p.URL), "worker", "--id", "w1", "--concurrency", "2", "--work-dir", filepath.Join(dir, "work"),
		"--allow-input-host", "127.0.0.1/32", "--max-input-bytes", strconv.Itoa(320<<20), "--workload", "tanimoto")
	want := map[string]string{
		"endless": "the input is larger than 335544320 bytes, the most this worker downloads",
		"long":    "line 3: the record that starts here is longer than 1 MiB",
	}
	jobs := map[string]string{}
	for name, c := range chunks {
		var j jobOut
		if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "tanimoto", "max_attempts": 3, "lease_seconds": 120,
			"parameters": map[string]any{"query": "ff"}, "input": map[string]any{"chunks": []any{c}}}, &j); s != 201 {
			t.Fatalf("create job: %d", s)
		}
		jobs[name] = j.JobID
	}
	for name, id := range jobs {
		workerWaitFor(t, 120*time.Second, "the "+name+" job to fail", func() bool {
			var got jobOut
			call(t, "GET", p.URL+"/jobs/"+id, "ctok", nil, &got)
			return got.Status == "failed"
		})
		var tasks struct{ Tasks []taskOut }
		call(t, "GET", p.URL+"/jobs/"+id+"/tasks", "ctok", nil, &tasks)
		if tk := tasks.Tasks[0]; tk.Attempt != 1 || !strings.Contains(tk.Error, want[name]) {
			t.Errorf("%s: the task failed at attempt %d with %q; want it failed for good at once, saying %q", name, tk.Attempt, tk.Error, want[name])
		}
	}
	hwm := peakRSS(t, w.Cmd.Process.Pid)
	bound := int64(96 << 20)
	if binary.Race {
		bound = 192 << 20
	}
	t.Logf("the worker's peak RSS: %s", fmtBytes(hwm))
	if hwm > bound {
		t.Errorf("the worker's peak RSS reached %s on lines of 256 MiB; want it under %s", fmtBytes(hwm), fmtBytes(bound))
	}
}

// TestWorkerRefusesWorkDir runs real `scimesh worker` processes on work
// directories another process could tamper with: one owned by nobody
// whose lock is held, as another user of a shared /tmp could make it
// (the worker used to wait for the lock for ever), and one of its own
// whose lock another process holds. Each exits promptly, with status 1
// and a message saying why, having claimed nothing.
func TestWorkerRefusesWorkDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a work directory of another user needs root to make (chown); run the tests as root")
	}
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "data", "scimesh.db"))
	theirs, mine := filepath.Join(dir, "theirs"), filepath.Join(dir, "mine")
	for _, d := range []string{theirs, mine} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(d, ".scimesh-worker.lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	for d, want := range map[string]string{
		theirs: "the work directory " + theirs + " belongs to another user (uid 65534",
		mine:   "the work directory " + mine + " is in use by another worker (lock held)",
	} {
		w := start(t, dir, workerEnv(p.URL), "worker", "--id", "w1", "--work-dir", d, "--workload", "copy=cat")
		select {
		case <-w.Exited():
			err := w.Err()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(w.Stderr.String(), want) {
				t.Errorf("worker on %s exited with %v, want status 1 saying %q:\n%s", d, err, want, w.Stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("worker on %s still runs after 20s; want it refused at once:\n%s", d, w.Stderr.String())
		}
	}
}

// TestWorkerEnvironmentHidden runs a real `scimesh worker` as the user
// nobody, its token in its environment (SCIMESH_TOKEN), with a command
// that, as the same user, tries to read the worker's environment from
// /proc: the worker marks itself not dumpable, so the kernel refuses, and
// the command reports that it could not.
func TestWorkerEnvironmentHidden(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "running the worker as another user needs root; run the tests as root")
	}
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "data", "scimesh.db"))
	chunk := "id,value\na,1\n"
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, chunk)
	}))
	defer data.Close()
	sum := sha256.Sum256([]byte(chunk))

	// A directory nobody may reach, with a copy of the binary in it, and
	// the worker's own work directory.
	home, err := os.MkdirTemp("", "scimesh-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	bin := filepath.Join(home, "scimesh")
	exe, err := os.ReadFile(scimesh)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(home, "work")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// The command's shell is the child of its supervisor, the worker's.
	probe := `cat >/dev/null; w=$(awk '/^PPid:/ { print $2 }' /proc/$PPID/status); echo id,score
if env=$(tr '\0' '\n' </proc/$w/environ 2>&1); then echo "$env" | grep -q '^SCIMESH_TOKEN=' && echo leaked,1 || echo read-without-token,1; else echo refused,1; fi`
	cmd := exec.Command(bin, "worker", "--id", "nobody", "--work-dir", work, "--allow-input-host", "127.0.0.1/32", "--workload", "probe="+probe)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "SCIMESH_COORDINATOR=" + p.URL, "SCIMESH_TOKEN=wtok"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the worker's output:\n%s", testenv.LastLines(out.String(), 30))
		}
	})

	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "probe", "max_attempts": 1,
		"input": map[string]any{"chunks": []map[string]any{{"uri": data.URL + "/c.csv", "sha256": hex.EncodeToString(sum[:])}}}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	workerWaitFor(t, 30*time.Second, "the probe job to complete", func() bool {
		var got jobOut
		call(t, "GET", p.URL+"/jobs/"+j.JobID, "ctok", nil, &got)
		return got.Status == "completed"
	})
	var res string
	workerGetText(t, p.URL+"/jobs/"+j.JobID+"/result", &res)
	if res != "id,score\nrefused,1\n" {
		t.Fatalf("what the command, as the worker's user, got of the worker's /proc/PID/environ: %q; want it refused", res)
	}
}

// workerProcsWith lists the live processes that have one of args as an
// argument.
func workerProcsWith(args ...string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !workerAlive(pid) {
			continue
		}
		for _, a := range args {
			if strings.Contains(string(cmdline)+"\x00", "\x00"+a+"\x00") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func workerWaitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func workerGetText(t *testing.T, url string, out *string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer ctok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	*out = string(data)
}

// workerReadPID returns the process ID in a file, 0 until it is written.
func workerReadPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(string(data), "\n") {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// workerAlive reports whether process pid runs; a zombie does not.
func workerAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) && syscall.Kill(pid, 0) == nil
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestWorkerVersionFlag: --workload-version sets what the worker announces
// for a workload, and one that names no workload, or gives no version,
// is refused.
func TestWorkerVersionFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, bad := range []struct{ flag, want string }{
		{"b=1", "--workload-version b=1 names no workload"},
		{"a=", "gives no version"},
		{"a=two words", "must be 1-128 characters"},
	} {
		out, err := run(t, dir, workerEnv("http://127.0.0.1:1"), "worker", "--workload", "a=cat", "--workload-version", bad.flag)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("--workload-version %q: %v\n%s", bad.flag, err, out)
		}
	}
	p := serveSQLite(t, dir)
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w", "--work-dir", filepath.Join(dir, "work"),
		"--workload", "a=cat", "--workload-version", "a=3.1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got struct {
			Workloads []struct {
				Name     string   `json:"name"`
				Versions []string `json:"versions"`
			} `json:"workloads"`
		}
		if s := call(t, "GET", p.URL+"/workloads", "ctok", nil, &got); s != 200 {
			t.Fatalf("GET /workloads: %d", s)
		}
		if len(got.Workloads) == 1 && got.Workloads[0].Name == "a" && slices.Equal(got.Workloads[0].Versions, []string{"3.1"}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /workloads gives %+v; want a at version 3.1", got.Workloads)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
