//go:build unix

package worker

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// pump reads the process's stderr from f until it ends. Each read, and the
// lines it completes, happen under s's lock, so that drain, under the same
// lock, finds every byte written before it either handled already or still
// in the pipe.
func (s *sharedLines) pump(f *os.File) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		_, _ = io.Copy(lockedWriter{s}, f)
		return
	}
	s.mu.Lock()
	s.pipe = f
	s.mu.Unlock()
	buf := make([]byte, 32<<10)
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			n, rerr = syscall.Read(int(fd), buf)
			if errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EINTR) {
				return false // wait until there is something to read
			}
			if n > 0 {
				s.w.Write(buf[:n])
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			s.mu.Lock()
			s.w.flush()
			s.pipe = nil
			s.mu.Unlock()
			return
		}
	}
}

// drain handles what is in the pipe now; s.mu is held.
func (s *sharedLines) drain() {
	if s.pipe == nil {
		return
	}
	rc, err := s.pipe.SyscallConn()
	if err != nil {
		return
	}
	var buf [32 << 10]byte
	_ = rc.Control(func(fd uintptr) {
		for {
			n, err := syscall.Read(int(fd), buf[:])
			if n <= 0 || err != nil {
				return
			}
			s.w.Write(buf[:n])
		}
	})
}
