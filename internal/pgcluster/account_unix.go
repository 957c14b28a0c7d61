//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// account is a user the server binaries run as.
type account struct {
	uid, gid int
}

func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user %s has uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("user %s has gid %q: %w", name, u.Gid, err)
	}
	return &account{uid: uid, gid: gid}, nil
}

// apply makes cmd run as a; a nil a leaves cmd as it is.
func (a *account) apply(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)},
	}
}

// processAlive reports whether a process with ID pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
