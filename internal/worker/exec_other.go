//go:build !unix

package worker

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// shell is a command started by startShell. Without Unix process groups
// only the shell itself is killed on cancel; SciMesh workers are meant to
// run on Unix.
type shell struct{ cmd *exec.Cmd }

func startShell(ctx context.Context, s shellSpec) (*shell, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.command)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &shell{cmd: cmd}, nil
}

func (sh *shell) pid() int { return sh.cmd.Process.Pid }

// kill kills the shell.
func (sh *shell) kill() { _ = sh.cmd.Process.Kill() }

func (sh *shell) wait() error {
	err := sh.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return fmt.Errorf("the command exited with status %d", ee.ExitCode())
	}
	return fmt.Errorf("run the command: %w", err)
}
