package testenv

import (
	"net"
	"testing"
)

// NonLoopbackIP returns an IP address of this machine that is neither
// loopback nor link-local, IPv4 when there is one, for a test of what
// happens when something leaves the machine; Missing when there is none.
func NonLoopbackIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		Missing(t, "cannot list this machine's network addresses: "+err.Error())
	}
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	if v6 == "" {
		Missing(t, "this machine has no network address but loopback and link-local ones: a test of a remote address cannot run")
	}
	return v6
}
