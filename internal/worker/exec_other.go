//go:build !unix

package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// waitDelay is how long Wait waits for the command's output to close after
// the command exited.
const waitDelay = 5 * time.Second

// shellCommand prepares the operator's command string. Without Unix process
// groups only the shell itself is killed on cancel; SciMesh workers are
// meant to run on Unix.
func shellCommand(ctx context.Context, command, dir string, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = waitDelay
	return cmd
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	return nil
}

func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("the command exited with status %d", ee.ExitCode())
	}
	return fmt.Errorf("run the command: %w", err)
}

func pipe() (r, w *os.File, err error) { return os.Pipe() }
