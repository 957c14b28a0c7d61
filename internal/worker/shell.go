package worker

import (
	"io"
	"time"
)

// waitDelay is how long waiting for a command waits for its output to
// close after it exited (when processes it started keep stdout or stderr
// open), and for it to end once killed, before it is killed harder.
const waitDelay = 5 * time.Second

// shellSpec is an operator's command as the worker runs it for a task:
// /bin/sh -c command in dir with env, its standard streams connected to
// stdin, stdout and stderr. stdin should be an *os.File, so that the
// command reads it directly.
//
// startShell (one per platform) starts one and returns a *shell, whose
// wait waits for it to end, kills whatever it left running and words how
// it ended for a task's error (nil for exit status 0). Cancelling the
// context given to startShell kills the command and every process it
// started. On Linux they run under a supervisor process (supervise_linux.go)
// that also kills them when the worker dies, however it dies.
type shellSpec struct {
	command, dir   string
	env            []string
	stdin          io.Reader
	stdout, stderr io.Writer
}
