package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shell is a command started by startShell. On Linux the worker does not
// start /bin/sh itself: it starts its own binary again as the command's
// supervisor (see supervise_linux.go), in a process group of its own, with
// two pipes beside the standard streams — control, whose write end only
// the worker holds, and status, on which the supervisor reports how the
// command ended. When control reaches its end, because the worker closed
// it to kill the command or because the worker died (even by SIGKILL, the
// kernel closes its files), the supervisor kills every process the command
// started and exits.
type shell struct {
	cmd     *exec.Cmd
	control *os.File // the write end; closing it kills the command
	status  *os.File // the read end of the supervisor's report
}

// raceEnv is what a race-enabled worker adds to its supervisor's
// environment, and the supervisor takes away from the command's.
const raceEnv = "GORACE=atexit_sleep_ms=0"

// selfExe is the worker's own binary, as the kernel knows it: it is
// there even when the file was replaced since the worker started.
const selfExe = "/proc/self/exe"

func startShell(ctx context.Context, s shellSpec) (*shell, error) {
	controlR, controlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the supervisor's control pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		controlR.Close()
		controlW.Close()
		return nil, fmt.Errorf("make the supervisor's status pipe: %w", err)
	}
	cmd := exec.CommandContext(ctx, selfExe, supervisorArg, s.command)
	cmd.Args[0] = "scimesh"
	cmd.Dir, cmd.Env = s.dir, s.env
	if raceEnabled {
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], raceEnv)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	cmd.ExtraFiles = []*os.File{controlR, statusW} // fds 3 and 4
	// Its own group keeps a terminal's ^C away from it (the worker's
	// shutdown decides), and lets the worker kill the group should the
	// supervisor itself be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return controlW.Close() }
	// Long enough for the supervisor's kill passes (killDescendants, up to
	// 10 s) to end before exec gives up on it and kills it mid-sweep.
	cmd.WaitDelay = waitDelay + killPasses
	err = cmd.Start()
	controlR.Close()
	statusW.Close()
	if err != nil {
		controlW.Close()
		statusR.Close()
		return nil, err
	}
	return &shell{cmd: cmd, control: controlW, status: statusR}, nil
}

func (sh *shell) pid() int { return sh.cmd.Process.Pid }

// kill kills the command and every process it started; wait then reports
// how it ended.
func (sh *shell) kill() { sh.control.Close() }

func (sh *shell) wait() error {
	waitErr := sh.cmd.Wait()
	sh.control.Close()
	// The supervisor killed everything before it exited, unless it was
	// killed itself: then its group is what can still be reached.
	_ = killGroup(sh.cmd.Process.Pid)
	report := readReport(sh.status)
	sh.status.Close()

	switch kind, value, _ := strings.Cut(report, " "); kind {
	case "exit":
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return fmt.Errorf("the command's supervisor reported %q", report)
		}
		if err := statusError(syscall.WaitStatus(n)); err != nil {
			return err
		}
		if waitErr != nil {
			return exitError(waitErr) // the command's output held open past its end
		}
		return nil
	case "error":
		return fmt.Errorf("start the command: %s", value)
	}
	if waitErr == nil {
		return errors.New("the command's supervisor exited without saying how the command ended")
	}
	return fmt.Errorf("the command's supervisor ended before the command: %w", exitError(waitErr))
}

// readReport reads the supervisor's one-line report, which it wrote
// before it exited; "" when there is none.
func readReport(f *os.File) string {
	_ = f.SetReadDeadline(time.Now().Add(time.Second))
	data, _ := io.ReadAll(io.LimitReader(f, 4<<10))
	return strings.TrimSpace(string(data))
}
