//go:build unix

package worker

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// lockWorkDir takes the shared lock of dir for the worker's life, calling
// sweep first when it can have the lock exclusively (no other live worker
// holds it). The two steps are not one atomic change: another worker
// starting in between may sweep too, which is harmless, since neither runs
// a task before it holds the lock shared.
func lockWorkDir(dir string, sweep func(), log *slog.Logger) (release func(), err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, workDirError(dir, err)
	}
	fd := int(f.Fd())
	switch err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		sweep()
	case errors.Is(err, syscall.EWOULDBLOCK):
		log.Info("another running worker uses this work directory: leftovers are not removed now", "dir", dir)
	default:
		log.Warn("cannot lock the work directory, so leftovers of killed workers are not removed (a file system without locks?)", "dir", dir, "error", err)
		return func() { f.Close() }, nil
	}
	if err := flock(fd, syscall.LOCK_SH); err != nil {
		log.Warn("cannot lock the work directory shared", "dir", dir, "error", err)
	}
	return func() { f.Close() }, nil
}

func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
