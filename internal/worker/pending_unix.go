//go:build unix

package worker

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// pending reports, without waiting, whether the read end of a pipe f has
// bytes to read or has come to its end.
func pending(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ready := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			ready = err == nil && n > 0
			return
		}
	})
	return ready
}
