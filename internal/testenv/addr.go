package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
)

// FreeAddr returns a loopback address free now, for a coordinator that must
// be reachable at an address known before it starts (a topology) or again
// after a restart.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
}

// FreePorts returns n distinct loopback ports free now. They are below
// Linux's ephemeral range (32768 and up by default), from which the kernel
// picks the ports of listeners on port 0 and of outgoing connections: so no
// other test can be handed one meanwhile.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range 100 * n {
		if len(ports) == n {
			return ports
		}
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		ln.Close()
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	if len(ports) < n {
		t.Fatalf("no %d free ports in 20000-31999", n)
	}
	return ports
}

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
