//go:build !unix

package worker

import (
	"io"
	"os"
)

// pump copies the process's stderr from f into its lines until it ends.
// Outside Unix, a line a chunk's process wrote just before its done frame
// may reach the next task's log, or the worker's.
func (s *sharedLines) pump(f *os.File) {
	defer f.Close()
	_, _ = io.Copy(lockedWriter{s}, f)
}

// drain does nothing outside Unix.
func (s *sharedLines) drain() {}
