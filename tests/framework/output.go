package framework

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// LastLines is the end of a process's or a server's output, short enough
// that the failure it explains stays in view at the end of a test run.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[%d earlier lines left out]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

// CheckDown fails t unless nothing answers at addr: a Restart checks with
// it that the coordinator it stopped is gone before it starts it again.
func CheckDown(t testing.TB, addr string) {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("a stopped coordinator's address %s still accepts connections", addr)
	}
}
