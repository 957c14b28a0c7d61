package framework

import (
	"net"
	"testing"
	"time"
)

// CheckDown fails t unless nothing answers at addr: a Restart checks with
// it that the coordinator it stopped is gone before it starts it again.
func CheckDown(t testing.TB, addr string) {
	t.Helper()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("a stopped coordinator's address %s still accepts connections", addr)
	}
}
