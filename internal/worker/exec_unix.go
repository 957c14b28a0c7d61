//go:build unix

package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// waitDelay is how long Wait waits for the command's output to close after
// the command exited, when processes it started keep stdout or stderr open.
const waitDelay = 5 * time.Second

// shellCommand prepares the operator's command string to run as
// /bin/sh -c COMMAND in dir with env, in a process group of its own, so that
// cancelling ctx kills it and every process it started.
func shellCommand(ctx context.Context, command, dir string, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// killGroup kills the command's process group: the shell and everything it
// started that did not leave the group. A group already gone is no error.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", cmd.Process.Pid, err)
	}
	return nil
}

// exitError words how a command ended, for a task's error.
func exitError(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if errors.Is(err, exec.ErrWaitDelay) {
			return fmt.Errorf("the command exited, but processes it started kept its stdout or stderr open for %v more; they were killed", waitDelay)
		}
		return fmt.Errorf("run the command: %w", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Errorf("the command was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Errorf("the command exited with status %d", ee.ExitCode())
}

// pipe returns the two ends of an OS pipe for a command's stdin.
func pipe() (r, w *os.File, err error) { return os.Pipe() }
