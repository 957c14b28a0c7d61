//go:build unix

package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// checkWorkDir checks that dir is a directory of the worker's own: owned
// by its user, and not writable by group or others.
func checkWorkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return workDirError(dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("the work directory %s is not a directory (check --work-dir)", dir)
	case !ok:
		return fmt.Errorf("the work directory %s: its owner cannot be read", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("the work directory %s belongs to another user (uid %d; this worker runs as uid %d), who could change what commands run in or take its lock: give a --work-dir of your own, or let the worker create it", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("the work directory %s may be written by its group or by others (mode %04o), who could change what commands run in or take its lock: chmod go-w it, or give a --work-dir only you may write", dir, fi.Mode().Perm())
	}
	return nil
}

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
