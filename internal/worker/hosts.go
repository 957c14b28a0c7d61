package worker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// hostPolicy says where hosted inputs (a job's input.chunks URIs) may be
// fetched from: Config.AllowInputHosts, the operator's --allow-input-host
// patterns. It is checked when a connection is dialled, on the address
// actually dialled, so that neither a redirect nor a DNS answer that
// changes between a check and the connection (DNS rebinding) gets past it.
//
// Without patterns, any address is allowed but loopback, link-local and
// unspecified ones (127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10, 0.0.0.0/8,
// ::): a job must not make a worker read its own machine's services or a
// cloud metadata endpoint. With patterns, a connection is allowed when the
// address dialled is in one of the CIDRs, or the URL's host name matches
// one of the names (exactly, or as a subdomain of a "*.domain"). A
// wildcard name does not lift the ban on loopback and link-local
// addresses (whoever runs the domain's DNS could point it anywhere); an
// exact name, or a CIDR that covers the address, does.
type hostPolicy struct {
	patterns []string       // as given, for messages
	names    []string       // exact host names, lower case
	suffixes []string       // ".example.org" for "*.example.org"
	prefixes []netip.Prefix // CIDRs, and single addresses as /32 or /128
}

// parseHostPolicy reads --allow-input-host patterns.
func parseHostPolicy(patterns []string) (*hostPolicy, error) {
	p := &hostPolicy{}
	for _, raw := range patterns {
		pat := strings.ToLower(strings.TrimSpace(raw))
		p.patterns = append(p.patterns, pat)
		switch {
		case strings.Contains(pat, "/"):
			pre, err := netip.ParsePrefix(pat)
			if err != nil {
				return nil, fmt.Errorf("--allow-input-host %q is not a CIDR such as 10.0.0.0/8 or fd00::/8: %w", raw, err)
			}
			p.prefixes = append(p.prefixes, unmapPrefix(pre).Masked())
		case isAddr(pat):
			a := normAddr(netip.MustParseAddr(pat))
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
		case strings.HasPrefix(pat, "*."):
			if !validHostName(pat[2:]) {
				return nil, fmt.Errorf("--allow-input-host %q: after \"*.\" give a domain such as example.org", raw)
			}
			p.suffixes = append(p.suffixes, strings.TrimSuffix(pat[1:], "."))
		case validHostName(pat):
			p.names = append(p.names, strings.TrimSuffix(pat, "."))
		default:
			return nil, fmt.Errorf("--allow-input-host %q is not a host name (data.example.org), a *.domain or a CIDR (10.0.0.0/8); give no scheme, port or path", raw)
		}
	}
	return p, nil
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// normAddr is a as it is matched: IPv4-mapped IPv6 as IPv4, no zone.
func normAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// unmapPrefix turns a prefix of IPv4-mapped IPv6 addresses into IPv4.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// validHostName reports whether s is a DNS name: dot-separated labels of
// letters, digits, '-' and '_', with an optional final dot.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// metadataAddrs are cloud metadata endpoints outside the link-local
// ranges: AWS's over IPv6 and Alibaba Cloud's.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true,
	netip.MustParseAddr("100.100.100.200"): true,
}

// localKind names what makes a an address hosted inputs may not come from
// by default; "" when it is none of those.
func localKind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified(), a.Is4() && a.As4()[0] == 0:
		// Connecting to 0.0.0.0 or :: reaches this machine.
		return "unspecified (this machine)"
	case metadataAddrs[a.Unmap()]:
		return "cloud metadata"
	}
	return ""
}

// hostRefusedError is an input host the worker's --allow-input-host rules
// refuse. The task cannot succeed on this worker: its failure is permanent.
type hostRefusedError struct {
	host   string // the URL's host name
	addr   netip.Addr
	reason string
	hint   string
}

func (e *hostRefusedError) Error() string {
	where := fmt.Sprintf("%q (address %s)", e.host, e.addr)
	if e.host == e.addr.String() {
		where = e.addr.String()
	}
	return fmt.Sprintf("the input host %s is not allowed: %s; %s", where, e.reason, e.hint)
}

// check decides whether a connection to addr, dialled for a URL whose host
// is host, is allowed.
func (p *hostPolicy) check(host string, addr netip.Addr) error {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	addr = normAddr(addr)
	bits := "/32"
	if addr.Is6() {
		bits = "/128"
	}
	allowAddr := "--allow-input-host " + addr.String() + bits
	kind := localKind(addr)
	if len(p.patterns) == 0 {
		if kind == "" {
			return nil
		}
		return &hostRefusedError{host: host, addr: addr,
			reason: "it is a " + kind + " address, which this worker never fetches hosted chunks from by default",
			hint:   "to allow it, start the worker with " + allowAddr}
	}
	for _, pre := range p.prefixes {
		if pre.Contains(addr) {
			return nil
		}
	}
	for _, n := range p.names {
		if host == n {
			return nil
		}
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			if kind == "" {
				return nil
			}
			return &hostRefusedError{host: host, addr: addr,
				reason: fmt.Sprintf("it matches --allow-input-host *%s but resolved to a %s address, which a wildcard does not allow", s, kind),
				hint:   fmt.Sprintf("name the host exactly (--allow-input-host %s) or allow its address (%s)", host, allowAddr)}
		}
	}
	hint := "to allow it, add " + allowAddr
	if host != addr.String() {
		hint = fmt.Sprintf("to allow it, add --allow-input-host %s or %s", host, allowAddr)
	}
	return &hostRefusedError{host: host, addr: addr,
		reason: "it matches none of this worker's --allow-input-host patterns (" + strings.Join(p.patterns, ", ") + ")",
		hint:   hint}
}

// dialContext returns a DialContext for an http.Transport that dials with
// d and refuses, before connecting, every address that p does not allow
// for the host being dialled.
func (p *hostPolicy) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", address, err)
		}
		dd := *d
		dd.Control = func(_, dialled string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(dialled)
			if err != nil {
				return fmt.Errorf("dial %s: unexpected address %q: %w", address, dialled, err)
			}
			return p.check(host, ap.Addr())
		}
		return dd.DialContext(ctx, network, address)
	}
}
