package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// marked returns a sleep duration of about 1000 s that names this test
// alone, to find its processes in /proc by their command line.
func marked(i int) string {
	return fmt.Sprintf("1000.%d%03d%d", os.Getpid(), time.Now().UnixNano()%1000, i)
}

// withArg lists the processes whose command line holds arg.
func withArg(arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		_, state, ok := procStat(pid)
		if ok && state != 'Z' && bytes.Contains(append(cmdline, 0), []byte("\x00"+arg+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNone waits until no process has one of args in its command line.
func waitNone(t *testing.T, timeout time.Duration, args ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, a := range args {
			left = append(left, withArg(a)...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still run %v later", left, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAll waits until every one of args is in some process's command line.
func waitAll(t *testing.T, timeout time.Duration, args ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, a := range args {
		for len(withArg(a)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no process with argument %s after %v", a, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// escapes is a command that leaves three sleeps behind: one in its group,
// one in a session of its own, and one that also lost its parent (a
// daemon's double fork).
func escapes(a, b, c string) string {
	return fmt.Sprintf("sleep %s & setsid sleep %s & (setsid sleep %s &); echo started", a, b, c)
}

// TestShellKillsWhatItLeaves runs a command that exits while processes it
// started run on, some of which left its process group: none survives
// the command's end.
func TestShellKillsWhatItLeaves(t *testing.T) {
	t.Parallel()
	a, b, c := marked(1), marked(2), marked(3)
	var out bytes.Buffer
	err := runShell(t.Context(), shellSpec{command: escapes(a, b, c) + "; sleep 0.5", dir: t.TempDir(), stdout: &out, stderr: os.Stderr})
	if err != nil || out.String() != "started\n" {
		t.Fatalf("command: %v, output %q", err, out.String())
	}
	waitNone(t, 2*time.Second, a, b, c)
}

// TestShellCancelKillsTree cancels a command that waits for what it
// started: everything dies, setsid or not.
func TestShellCancelKillsTree(t *testing.T) {
	t.Parallel()
	a, b, c := marked(1), marked(2), marked(3)
	ctx, cancel := context.WithCancel(t.Context())
	sh, err := startShell(ctx, shellSpec{command: escapes(a, b, c) + "; wait", dir: t.TempDir(), stdout: os.Stderr, stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, 10*time.Second, a, b, c)
	cancel()
	done := make(chan error, 1)
	go func() { done <- sh.wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled command did not end in 10 s")
	}
	waitNone(t, 2*time.Second, a, b, c)
}

// TestShellOutlivesItsThread starts a command from a goroutine whose OS
// thread then exits (a goroutine that ends locked to its thread takes the
// thread with it). A design on PR_SET_PDEATHSIG, which fires when the
// thread that forked exits, would kill the command here.
func TestShellOutlivesItsThread(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	started := make(chan *shell, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		sh, err := startShell(context.Background(), shellSpec{command: "sleep 1; echo alive", dir: t.TempDir(), stdout: &out, stderr: os.Stderr})
		if err != nil {
			t.Error(err)
		}
		started <- sh
	}()
	sh := <-started
	if sh == nil {
		return
	}
	if err := sh.wait(); err != nil || strings.TrimSpace(out.String()) != "alive" {
		t.Fatalf("command started from a thread that exited: %v, output %q; want it to run to its end", err, out.String())
	}
}

// TestShellExitStatus checks how the supervisor reports the command's end.
func TestShellExitStatus(t *testing.T) {
	t.Parallel()
	for command, want := range map[string]string{
		"exit 0":     "",
		"exit 7":     "the command exited with status 7",
		"kill -9 $$": "the command was killed by signal 9 (killed)",
		"kill $$":    "the command was killed by signal 15 (terminated)",
	} {
		err := runShell(t.Context(), shellSpec{command: command, dir: t.TempDir(), stdout: os.Stderr, stderr: os.Stderr})
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("%s: %v, want %q", command, err, want)
		}
	}
}

// TestSupervisorByHand checks that the supervisor's mode refuses to run
// without the worker's pipes.
func TestSupervisorByHand(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(selfExe, supervisorArg, "true").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not for use by hand") {
		t.Fatalf("the supervisor without its pipes: %v, output %q; want exit code 2 and a message", err, out)
	}
}
