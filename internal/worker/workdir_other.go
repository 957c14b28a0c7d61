//go:build !unix

package worker

import (
	"log/slog"
)

// checkWorkDir accepts dir: without Unix owners and modes there is nothing
// it can check.
func checkWorkDir(string) error { return nil }

// lockWorkDir does nothing without Unix file locks: leftovers are not
// removed, since the worker cannot tell whether another one uses dir.
func lockWorkDir(dir string, _ func() (remove func()), log *slog.Logger) (release func(), err error) {
	log.Info("leftovers of killed workers are not removed on this system", "dir", dir)
	return func() {}, nil
}
