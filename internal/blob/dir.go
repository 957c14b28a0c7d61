package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// Dir is a Store of files in a directory: blobs under files/, blobs being
// written under tmp/. A blob is written to a temporary file, synced, and
// linked into place, so it exists whole or not at all, even across a
// crash or a power loss.
type Dir struct {
	dir string
}

// tempPattern is os.CreateTemp's pattern of a blob being written, and
// tempRe the names it makes of it (the * becomes decimal digits): only
// those are leftovers of this store's writes.
const tempPattern = "blob-*"

var tempRe = regexp.MustCompile(`^blob-[0-9]{1,20}$`)

var _ Store = (*Dir)(nil)

// OpenDir returns the store rooted at dir, creating it when needed.
func OpenDir(dir string) (*Dir, error) {
	for _, d := range []string{dir, filepath.Join(dir, "tmp"), filepath.Join(dir, "files")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("blob: create %s: %w", d, err)
		}
	}
	return &Dir{dir: dir}, nil
}

// String says where the files are.
func (s *Dir) String() string { return "files under " + s.dir }

// Close does nothing: a directory holds no resources.
func (s *Dir) Close() error { return nil }

func (s *Dir) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, "files", key), nil
}

// OpenRange reads length bytes of the file named key from offset.
func (s *Dir) OpenRange(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", key, err)
	}
	if length < 0 {
		length = 1<<63 - 1 - offset
	}
	return &fileRange{SectionReader: io.NewSectionReader(f, offset, length), f: f}, nil
}

type fileRange struct {
	*io.SectionReader
	f *os.File
}

func (r *fileRange) Close() error { return r.f.Close() }

// dirWriter writes a blob of a Dir.
type dirWriter struct {
	s       *Dir
	key     string
	path    string
	f       *os.File
	n       int64
	flushed int64 // bytes handed to startWriteback so far
	done    bool
}

// writebackEvery is how many bytes a Writer lets pile up in the page cache
// before it starts writing them to disk.
const writebackEvery = 16 << 20

// Create starts the file named key in the temporary directory.
func (s *Dir) Create(_ context.Context, key string) (Writer, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), tempPattern)
	if err != nil {
		return nil, fmt.Errorf("blob: create: %w", err)
	}
	return &dirWriter{s: s, key: key, path: p, f: f}, nil
}

// Write appends p to the blob.
func (w *dirWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	if w.n-w.flushed >= writebackEvery {
		startWriteback(w.f, w.flushed, w.n-w.flushed)
		w.flushed = w.n
	}
	return n, err
}

// Commit syncs the file to disk and gives it its name, which must not be
// taken.
func (w *dirWriter) Commit() (size int64, err error) {
	defer w.Abort()
	if err := w.f.Sync(); err != nil {
		return 0, fmt.Errorf("blob: sync: %w", err)
	}
	if err := w.f.Close(); err != nil {
		return 0, fmt.Errorf("blob: close: %w", err)
	}
	// A hard link fails when the name is taken, where a rename would
	// silently replace the blob of a concurrent commit.
	if err := os.Link(w.f.Name(), w.path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return 0, fmt.Errorf("blob: name %s is taken", w.key)
		}
		return 0, fmt.Errorf("blob: commit: %w", err)
	}
	os.Remove(w.f.Name())
	w.done = true
	if d, err := os.Open(filepath.Dir(w.path)); err == nil {
		_ = d.Sync() // make the link durable; best effort on file systems without it
		d.Close()
	}
	return w.n, nil
}

// Abort discards the blob unless it was committed.
func (w *dirWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.f.Name())
}

// List lists the files of blobs.
func (s *Dir) List(ctx context.Context, fn func(page []Info) error) error {
	return listDir(ctx, filepath.Join(s.dir, "files"), keyRe, fn)
}

// ListTemp lists the temporary files of blobs being written.
func (s *Dir) ListTemp(ctx context.Context, fn func(page []Info) error) error {
	return listDir(ctx, filepath.Join(s.dir, "tmp"), tempRe, fn)
}

// listDir lists the regular files of dir whose names match ours.
func listDir(ctx context.Context, dir string, ours *regexp.Regexp, fn func(page []Info) error) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("blob: list %s: %w", dir, err)
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(listPage)
		page := make([]Info, 0, len(entries))
		for _, e := range entries {
			if !ours.MatchString(e.Name()) {
				continue // not one of ours
			}
			fi, ierr := e.Info()
			if ierr != nil || !fi.Mode().IsRegular() {
				continue // removed meanwhile, or not one of ours
			}
			page = append(page, Info{Key: e.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
		}
		if len(page) > 0 {
			if ferr := fn(page); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("blob: list %s: %w", dir, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Remove deletes the file named key.
func (s *Dir) Remove(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: remove %s: %w", key, err)
	}
	return nil
}

// RemoveTemp deletes the temporary file name.
func (s *Dir) RemoveTemp(_ context.Context, name string) error {
	if !tempRe.MatchString(name) {
		return fmt.Errorf("blob: %q is not the name of a temporary file of a blob: %w", name, ErrNotFound)
	}
	if err := os.Remove(filepath.Join(s.dir, "tmp", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: remove temporary file %s: %w", name, err)
	}
	return nil
}
