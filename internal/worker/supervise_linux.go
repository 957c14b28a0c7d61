package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The supervisor: on Linux every command a worker runs has one (see
// exec_linux.go). It is the worker's own binary run again with
// supervisorArg as its first argument, which the init below recognizes in
// any binary that links this package (scimesh, and the test binaries), so
// that no main needs to know. It
//
//   - marks itself a child subreaper (PR_SET_CHILD_SUBREAPER), so that
//     every process the command starts stays its descendant even when the
//     process between them exits — a daemon that double-forks and calls
//     setsid included;
//   - runs /bin/sh -c COMMAND with its own standard streams, directory and
//     environment, which the worker set up;
//   - waits for the first of: the shell's exit, the end of the control
//     pipe (fd 3), or SIGTERM, SIGINT or SIGHUP;
//   - kills every descendant with SIGKILL, again until none is left, reaps
//     them, reports the shell's wait status on the status pipe (fd 4) if
//     it exited, and exits.
//
// The control pipe's write end lives only in the worker, so its end means
// the worker closed it (to kill the command: a cancelled job, a lost
// lease, a timeout, the end of the grace period) or the worker died, by
// whatever signal. PR_SET_PDEATHSIG would not do instead: it fires when
// the thread that started the child exits, and Go starts and ends threads
// as it likes. The shell gets PR_SET_PDEATHSIG=SIGKILL from the
// supervisor's main thread (locked: it lives as long as the process), for
// the case that the supervisor itself is killed.
//
// What escapes it: processes that are not descendants of the command
// (started for it by another daemon: systemd-run, at, a container
// engine, ssh to another host), and a process that keeps forking faster
// than the kill passes run for the 10 s they are given.

// supervisorArg is the first argument that makes a binary linking this
// package the supervisor of one command.
const supervisorArg = "__scimesh-supervise"

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

func init() {
	if len(os.Args) >= 2 && os.Args[1] == supervisorArg {
		os.Exit(supervise(os.Args[2:]))
	}
}

// supervise runs one command as described above and returns the exit code
// of the supervisor.
func supervise(args []string) int {
	control, status := os.NewFile(3, "control"), os.NewFile(4, "status")
	if len(args) != 1 || !isPipe(control) || !isPipe(status) {
		fmt.Fprintf(os.Stderr, "scimesh: %s is the worker's own supervisor of a command; it is not for use by hand\n", supervisorArg)
		return 2
	}
	// Neither pipe may reach the command: the control pipe's end must
	// come from the worker only.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(status, "error the worker's supervisor cannot become a subreaper: %v\n", errno)
		return 0
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	env := os.Environ()
	if raceEnabled && len(env) > 0 && env[len(env)-1] == raceEnv {
		env = env[:len(env)-1]
	}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", args[0]}, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(status, "error /bin/sh: %v\n", err)
		return 0
	}
	exited := make(chan syscall.WaitStatus, 1)
	go reap(pid, exited)
	parentGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, control)
		close(parentGone)
	}()

	select {
	case ws := <-exited:
		killDescendants()
		fmt.Fprintf(status, "exit %d\n", uint32(ws))
		return 0
	case <-parentGone:
	case <-stop:
	}
	killDescendants()
	return 1
}

func isPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// reap reaps the supervisor's children — the shell, and the orphans of the
// command that were handed to it — until it has none, and sends the
// shell's wait status on exited.
func reap(shell int, exited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			return // ECHILD: no child, so no descendant either
		case pid == shell:
			exited <- ws
		}
	}
}

// killPasses is how long killDescendants goes on.
const killPasses = 10 * time.Second

// killDescendants kills every descendant of this process, pass after pass
// (a process may fork before its kill lands; its child is then an orphan
// the next pass finds), until none is left alive or 10 s have gone by.
func killDescendants() {
	self := os.Getpid()
	deadline := time.Now().Add(killPasses)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		pids := descendants(self)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pause)
	}
}

// descendants lists the live (not zombie) descendants of process root,
// from /proc.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	live := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		live[pid] = state != 'Z' && state != 'X'
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if live[c] {
				out = append(out, c)
			}
			queue = append(queue, c)
		}
	}
	return out
}

// procStat reads a process's parent and state from /proc/PID/stat, whose
// command name (in parentheses) may hold any byte.
func procStat(pid int) (ppid int, state byte, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0][0], err == nil
}
