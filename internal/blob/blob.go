// Package blob keeps SciMesh's large files — normalized uploads — on disk
// under the data directory, by names the caller chooses. A file is written
// to a temporary name, synced, and renamed into place, so a blob exists
// whole or not at all, even across a crash.
//
// Several coordinators that share one database must share the data
// directory too (a network file system): the database names blobs, the
// directory holds them.
package blob

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// ErrNotFound reports a blob that is not in the store.
var ErrNotFound = errors.New("blob: not found")

// Store is a directory of named files.
type Store struct {
	dir string
}

// Open returns the store rooted at dir, creating it when needed.
func Open(dir string) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, "tmp"), filepath.Join(dir, "files")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("blob: create %s: %w", d, err)
		}
	}
	return &Store{dir: dir}, nil
}

var keyRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,127}$`)

func (s *Store) path(key string) (string, error) {
	if !keyRe.MatchString(key) {
		return "", fmt.Errorf("blob: name %q must be 2-128 of a-z 0-9 - : %w", key, ErrNotFound)
	}
	return filepath.Join(s.dir, "files", key), nil
}

// Open opens the blob named key for reading.
func (s *Store) Open(key string) (*os.File, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", key, ErrNotFound)
	}
	return f, err
}

// Writer writes a new blob. Commit names it; Abort (or a Commit that
// failed) leaves nothing behind.
type Writer struct {
	s       *Store
	f       *os.File
	n       int64
	flushed int64 // bytes handed to startWriteback so far
	done    bool
}

// writebackEvery is how many bytes a Writer lets pile up in the page cache
// before it starts writing them to disk.
const writebackEvery = 16 << 20

// Create starts a new blob.
func (s *Store) Create() (*Writer, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "blob-*")
	if err != nil {
		return nil, fmt.Errorf("blob: create: %w", err)
	}
	return &Writer{s: s, f: f}, nil
}

// Write appends p to the blob.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	if w.n-w.flushed >= writebackEvery {
		startWriteback(w.f, w.flushed, w.n-w.flushed)
		w.flushed = w.n
	}
	return n, err
}

// Commit syncs the blob to disk and gives it its name, which must not be
// taken. It returns the blob's size.
func (w *Writer) Commit(key string) (size int64, err error) {
	defer w.Abort()
	p, err := w.s.path(key)
	if err != nil {
		return 0, err
	}
	if err := w.f.Sync(); err != nil {
		return 0, fmt.Errorf("blob: sync: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return 0, fmt.Errorf("blob: close: %w", err)
	}
	// A hard link fails when the name is taken, where a rename would
	// silently replace the blob of a concurrent commit.
	if err := os.Link(w.f.Name(), p); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, fmt.Errorf("blob: name %s is taken", key)
		}
		return 0, fmt.Errorf("blob: commit: %w", err)
	}
	os.Remove(w.f.Name())
	w.done = true
	if d, err := os.Open(filepath.Dir(p)); err == nil {
		_ = d.Sync() // make the rename durable; best effort on file systems without it
		d.Close()
	}
	return w.n, nil
}

// Abort discards the blob unless it was committed. It is safe to call twice.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.f.Name())
}

var _ io.Writer = (*Writer)(nil)
