package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockName is the file in the work directory that workers sharing the
// directory lock (see openWorkDir).
const lockName = ".scimesh-worker.lock"

// sweptPrefix starts the name of the directory a sweep moves leftovers
// into before it removes them.
const sweptPrefix = ".scimesh-swept-"

// The work directory is the worker's own: one it created, or one owned by
// its user that neither group nor others may write (checkWorkDir, on
// Unix). Anyone who could write it could put or swap what the worker
// runs a command in, or hold its lock. A symbolic link to it is resolved
// once, at start, so that the worker keeps to the directory it checked
// even if the link changes.
//
// Leftovers: a worker that was killed leaves its attempts' directories
// behind. On start, a worker removes them — but only when no other live
// worker uses the same work directory, since the directories of that
// worker's running tasks look the same. Every worker holds a shared lock
// (flock) on WORK_DIR/.scimesh-worker.lock while it runs; one that gets
// the lock exclusively at start is alone: it moves the leftovers into a
// directory .scimesh-swept-* of the work directory, takes the lock shared,
// then removes that directory, so that the lock is held exclusively only
// as long as a few renames take. A lock held by a dead process is
// released by the kernel, so a killed worker never blocks the sweep. A
// worker never waits long for the lock: when another process holds it
// exclusively for longer than a sweep takes, the worker does not start
// (see lockWorkDir). On a file system without working locks the sweep is
// skipped with a warning.
//
// What the sweep removes is narrow: only entries directly under the work
// directory that are directories (not symbolic links, which are never
// followed), whose name is one that safeName gives a task ID (and holds
// the ':' of SHARD:LOCAL), and whose entries are all attempt directories
// (named by a number); and the .scimesh-swept-* directories of a sweep
// that was cut short. Anything else is left alone and logged.

// openWorkDir makes the work directory (only its owner may enter it),
// checks that it is the worker's own, sweeps leftovers when this worker
// is alone in it (and does not keep work directories), and returns what
// releases its lock when the worker stops.
func (w *Worker) openWorkDir() (release func(), err error) {
	dir := w.cfg.WorkDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, workDirError(dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, workDirError(dir, err)
	}
	if real != dir {
		w.log.Info("the work directory is a symbolic link: the worker uses where it leads", "dir", dir, "real", real)
		w.cfg.WorkDir, dir = real, real
	}
	if err := checkWorkDir(dir); err != nil {
		return nil, err
	}
	return lockWorkDir(dir, w.sweep, w.log)
}

// sweep moves what killed workers left in the work directory out of the
// way, and returns what removes it; see above.
func (w *Worker) sweep() (remove func()) {
	if w.cfg.KeepWorkDirs {
		w.log.Info("work directories are kept (--keep-work-dirs): leftovers of earlier runs are not removed", "dir", w.cfg.WorkDir)
		return func() {}
	}
	entries, err := os.ReadDir(w.cfg.WorkDir)
	if err != nil {
		w.log.Warn("could not list the work directory to remove leftovers", "dir", w.cfg.WorkDir, "error", err)
		return func() {}
	}
	var swept string // made when there is something to move
	var moved []string
	for _, e := range entries {
		if e.Name() == lockName {
			continue
		}
		path := filepath.Join(w.cfg.WorkDir, e.Name())
		if !isTaskDir(path, e) && !isSwept(e) {
			w.log.Warn("left alone in the work directory: not a task's directory", "path", path)
			continue
		}
		if swept == "" {
			if swept, err = os.MkdirTemp(w.cfg.WorkDir, sweptPrefix); err != nil {
				w.log.Warn("could not make a directory to sweep leftovers into", "dir", w.cfg.WorkDir, "error", err)
				return func() {}
			}
		}
		if err := os.Rename(path, filepath.Join(swept, e.Name())); err != nil {
			w.log.Warn("could not remove a leftover task directory", "path", path, "error", err)
			continue
		}
		moved = append(moved, path)
	}
	return func() {
		if swept == "" {
			return
		}
		if err := os.RemoveAll(swept); err != nil {
			w.log.Warn("could not remove leftover task directories", "path", swept, "error", err)
			return
		}
		for _, path := range moved {
			w.log.Info("removed a leftover task directory of an earlier run", "path", path)
		}
	}
}

// isSwept reports whether the entry e of the work directory is one a
// sweep moved leftovers into.
func isSwept(e os.DirEntry) bool {
	return e.IsDir() && e.Type()&os.ModeSymlink == 0 && strings.HasPrefix(e.Name(), sweptPrefix)
}

// isTaskDir reports whether the entry e at path is a task's directory as
// attemptDir makes them: WORK_DIR/TASK_ID with numbered attempts in it.
func isTaskDir(path string, e os.DirEntry) bool {
	name := e.Name()
	if !e.IsDir() || e.Type()&os.ModeSymlink != 0 || safeName(name) != name || !strings.Contains(name, ":") {
		return false
	}
	attempts, err := os.ReadDir(path)
	if err != nil {
		return false
	}
	for _, a := range attempts {
		if !a.IsDir() || !isNumber(a.Name()) {
			return false
		}
	}
	return true
}

func isNumber(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// workDirError words a work directory that cannot be used.
func workDirError(dir string, err error) error {
	return fmt.Errorf("the work directory %s cannot be used (check --work-dir): %w", dir, err)
}
