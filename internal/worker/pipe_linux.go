package worker

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe asks for a pipe of size bytes (F_SETPIPE_SZ), so that a command
// writing its output in small pieces fills it many times over before the
// worker needs to wake; the kernel's default is 64 KiB. A pipe that cannot
// grow (a size over /proc/sys/fs/pipe-max-size for an unprivileged
// worker) stays as it is.
func growPipe(f *os.File, size int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size)
	})
}
