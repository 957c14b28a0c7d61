//go:build !unix

package pgcluster

import (
	"errors"
	"os/exec"
)

// account is a user the server binaries run as; only unix systems switch
// users.
type account struct {
	uid, gid int
}

func lookupAccount(name string) (*account, error) {
	return nil, errors.New("switching to user " + name + " is only supported on unix")
}

func (a *account) apply(*exec.Cmd) {}

// processAlive reports true: without a portable check, no cluster is taken
// for an orphan.
func processAlive(int) bool { return true }
