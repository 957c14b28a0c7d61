//go:build unix && !linux

package worker

import (
	"context"
	"os/exec"
	"syscall"
)

// shell is a command started by startShell. Outside Linux it runs in a
// process group of its own, directly under the worker: cancelling kills
// the group, and so does its end, but processes that leave the group
// (setsid) and, should the worker die, the command itself are not killed.
type shell struct{ cmd *exec.Cmd }

func startShell(ctx context.Context, s shellSpec) (*shell, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.command)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &shell{cmd: cmd}, nil
}

func (sh *shell) pid() int { return sh.cmd.Process.Pid }

// kill kills the command's process group.
func (sh *shell) kill() { _ = killGroup(sh.cmd.Process.Pid) }

func (sh *shell) wait() error {
	err := sh.cmd.Wait()
	_ = killGroup(sh.cmd.Process.Pid) // whatever it left running
	if err != nil {
		return exitError(err)
	}
	return nil
}
