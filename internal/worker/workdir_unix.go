//go:build unix

package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
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

// lockWait bounds how long a worker waits for another process to let go
// of the work directory's exclusive lock, which a starting worker holds
// only while it moves leftovers aside.
const lockWait = 5 * time.Second

// lockWorkDir takes the shared lock of dir for the worker's life, calling
// sweep first when it can have the lock exclusively (no other live worker
// holds it), and the function sweep returns once the lock is shared. The
// lock file is opened without following a symbolic link, and the lock is
// never waited for longer than lockWait: a work directory whose lock
// another process holds exclusively is an error. The two steps are not one
// atomic change: another worker starting in between may sweep too, which
// is harmless, since neither runs a task before it holds the lock shared.
func lockWorkDir(dir string, sweep func() (remove func()), log *slog.Logger) (release func(), err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, workDirError(dir, fmt.Errorf("open its lock %s (not a symbolic link): %w", lockName, err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", lockName)
	}
	if err != nil {
		f.Close()
		return nil, workDirError(dir, err)
	}
	fd := int(f.Fd())
	remove := func() {}
	switch err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		remove = sweep()
	case errors.Is(err, syscall.EWOULDBLOCK):
		log.Info("another running worker uses this work directory: leftovers are not removed now", "dir", dir)
	default:
		log.Warn("cannot lock the work directory, so leftovers of killed workers are not removed (a file system without locks?)", "dir", dir, "error", err)
		return func() { f.Close() }, nil
	}
	if err := lockShared(fd); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the work directory %s is in use by another worker (lock held): another process has held %s exclusively for %v; stop it, or give this worker a --work-dir of its own", dir, path, lockWait)
		}
		return nil, workDirError(dir, fmt.Errorf("lock %s: %w", path, err))
	}
	remove()
	return func() { f.Close() }, nil
}

// lockShared takes the shared lock of fd, trying again for lockWait while
// another process holds it exclusively.
func lockShared(fd int) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := flock(fd, syscall.LOCK_SH|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
