//go:build unix

package worker

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// killGroup kills process group pgid: a command and everything it started
// that did not leave its group. A group already gone is no error.
func killGroup(pgid int) error {
	if pgid <= 0 {
		return nil
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}

// statusError words a command's wait status for a task's error; nil for
// exit status 0.
func statusError(ws syscall.WaitStatus) error {
	switch {
	case ws.Signaled():
		return fmt.Errorf("the command was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Errorf("the command exited with status %d", ws.ExitStatus())
	}
	return nil
}

// exitError words the error of exec.Cmd.Wait for a task's error.
func exitError(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if errors.Is(err, exec.ErrWaitDelay) {
			return fmt.Errorf("the command exited, but processes it started kept its stdout or stderr open for %v more; they were killed", waitDelay)
		}
		return fmt.Errorf("run the command: %w", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
		if err := statusError(ws); err != nil {
			return err
		}
	}
	return fmt.Errorf("the command exited with status %d", ee.ExitCode())
}
