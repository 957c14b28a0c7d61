package worker

import "golang.org/x/sys/unix"

// hideFromUser marks the worker's process not dumpable (PR_SET_DUMPABLE
// 0): its /proc files then belong to root, so that another process of
// the worker's user — a workload's command among them — cannot read its
// environment (the worker token, when it came from SCIMESH_TOKEN) or its
// memory, nor attach to it. It makes no core dump either. A process the
// worker starts is dumpable again once it execs (the command's
// supervisor is, and holds no token: see commandEnv).
func hideFromUser() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
