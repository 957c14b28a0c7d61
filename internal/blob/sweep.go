package blob

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Info describes a stored blob, or a temporary file of a blob being
// written.
type Info struct {
	Key     string // the blob's name; for a temporary file, its file name
	Size    int64
	ModTime time.Time // when it was last written, by the file system's clock
}

// listPage is how many directory entries List reads at a time.
const listPage = 512

// List calls fn with the blobs in pages of at most 512, in no particular
// order, until fn returns an error (which List returns) or every blob was
// listed. Blobs added or removed meanwhile may or may not be listed.
func (s *Store) List(fn func(page []Info) error) error {
	return listDir(filepath.Join(s.dir, "files"), fn)
}

// ListTemp is List for the temporary files of blobs being written, or
// left behind by a process that died while writing one.
func (s *Store) ListTemp(fn func(page []Info) error) error {
	return listDir(filepath.Join(s.dir, "tmp"), fn)
}

func listDir(dir string, fn func(page []Info) error) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("blob: list %s: %w", dir, err)
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(listPage)
		page := make([]Info, 0, len(entries))
		for _, e := range entries {
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
	}
}

// Remove deletes the blob named key. A blob already gone is no error.
func (s *Store) Remove(key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: remove %s: %w", key, err)
	}
	return nil
}

// RemoveTemp deletes the temporary file name (as ListTemp gives it). A
// file already gone is no error.
func (s *Store) RemoveTemp(name string) error {
	if name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("blob: temporary file name %q: %w", name, ErrNotFound)
	}
	if err := os.Remove(filepath.Join(s.dir, "tmp", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: remove temporary file %s: %w", name, err)
	}
	return nil
}
