package worker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/internal/worker"
)

// runRefused runs a worker with the work directory dir, which it must
// refuse: Run returns, within the given time, an error that says want.
// The coordinator is never reached: the work directory is checked first.
func runRefused(t *testing.T, dir string, within time.Duration, want string) {
	t.Helper()
	w, err := worker.New(worker.Config{Client: client.New("http://127.0.0.1:1", "t"), ID: "w", Concurrency: 1,
		Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}, WorkDir: dir, Logger: slogTo(&testenv.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- w.Run(t.Context()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run with the work directory %s: %v; want an error saying %q", dir, err, want)
		}
		t.Logf("refused after %v: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(within):
		t.Fatalf("Run with the work directory %s still runs after %v; want it refused", dir, within)
	}
}

// TestWorkDirOfAnotherUser refuses a work directory another user owns,
// as one of a shared /tmp that someone else made first would be; and a
// symbolic link to it.
func TestWorkDirOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "a work directory of another user needs root to make (chown); run the tests as root")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	runRefused(t, dir, 10*time.Second, "belongs to another user (uid 65534")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	runRefused(t, link, 10*time.Second, "the work directory "+dir+" belongs to another user")
}

// TestWorkDirWritableByOthers refuses a work directory its group or
// others may write, and takes it once they may not.
func TestWorkDirWritableByOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := filepath.Join(t.TempDir(), "work")
	for _, mode := range []os.FileMode{0o770, 0o707, 0o1777} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		runRefused(t, dir, 10*time.Second, "may be written by its group or by others")
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := b.startWorker(worker.Config{WorkDir: dir, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})
	r.waitLog(t, "worker started", 10*time.Second)

	// A directory the worker makes is its user's alone.
	made := filepath.Join(t.TempDir(), "new", "work")
	r = b.startWorker(worker.Config{WorkDir: made, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})
	r.waitLog(t, "worker started", 10*time.Second)
	if fi, err := os.Stat(made); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the work directory the worker made: %v, %v; want mode 0700", fi.Mode(), err)
	}
}

// TestWorkDirLockHeld holds the work directory's lock exclusively, as
// another process could: the worker does not wait for it for ever, but
// stops within a few seconds, saying the directory is in use.
func TestWorkDirLockHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, ".scimesh-worker.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	runRefused(t, dir, 20*time.Second, "the work directory "+dir+" is in use by another worker (lock held)")
}

// TestWorkDirLockIsNoLink puts a symbolic link where the lock file goes:
// the worker does not follow it (which would create or lock the file it
// points at) and refuses the directory.
func TestWorkDirLockIsNoLink(t *testing.T) {
	t.Parallel()
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "target")
	if err := os.Symlink(target, filepath.Join(dir, ".scimesh-worker.lock")); err != nil {
		t.Fatal(err)
	}
	runRefused(t, dir, 10*time.Second, "not a symbolic link")
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock's link was followed: its target %s exists (%v)", target, err)
	}
}
