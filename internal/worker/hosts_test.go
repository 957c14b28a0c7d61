package worker

import (
	"net/netip"
	"strings"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		patterns []string
		host     string
		addr     string
		want     string // "" allowed, else a part of the refusal
	}{
		// The default: anything but this machine and link-local.
		{nil, "data.example.org", "93.184.216.34", ""},
		{nil, "10.1.2.3", "10.1.2.3", ""},
		{nil, "localhost", "127.0.0.1", "loopback"},
		{nil, "127.1.2.3", "127.1.2.3", "--allow-input-host 127.1.2.3/32"},
		{nil, "evil.example.org", "::1", "--allow-input-host ::1/128"},
		{nil, "x", "::ffff:127.0.0.1", "loopback"},
		{nil, "169.254.169.254", "169.254.169.254", "link-local"},
		{nil, "x", "fe80::1%eth0", "link-local"},
		{nil, "0.0.0.0", "0.0.0.0", "unspecified"},
		{nil, "x", "::", "unspecified"},
		{nil, "x", "fd00:ec2::254", "cloud metadata"},
		{nil, "x", "100.100.100.200", "cloud metadata"},
		{[]string{"*.example.org."}, "data.example.org", "93.184.216.34", ""},
		// Names, exact and wildcard.
		{[]string{"data.example.org"}, "data.example.org", "93.184.216.34", ""},
		{[]string{"data.example.org"}, "DATA.example.org.", "93.184.216.34", ""},
		{[]string{"data.example.org"}, "other.example.org", "93.184.216.34", "matches none of this worker's --allow-input-host patterns (data.example.org)"},
		{[]string{"*.example.org"}, "a.b.example.org", "93.184.216.34", ""},
		{[]string{"*.example.org"}, "example.org", "93.184.216.34", "matches none"},
		{[]string{"*.example.org"}, "rebound.example.org", "127.0.0.1", "a wildcard does not allow"},
		{[]string{"*.example.org"}, "meta.example.org", "169.254.169.254", "link-local"},
		{[]string{"localhost"}, "localhost", "127.0.0.1", ""},
		{[]string{"localhost"}, "127.0.0.1", "127.0.0.1", "matches none"},
		// Addresses and CIDRs, on the address dialled whatever the name.
		{[]string{"10.0.0.0/8"}, "anything.internal", "10.9.8.7", ""},
		{[]string{"10.0.0.0/8"}, "anything.internal", "11.0.0.1", "matches none"},
		{[]string{"127.0.0.1/32"}, "localhost", "127.0.0.1", ""},
		{[]string{"127.0.0.1"}, "127.0.0.1", "127.0.0.1", ""},
		{[]string{"127.0.0.1/32"}, "127.0.0.2", "127.0.0.2", "matches none"},
		{[]string{"::1/128"}, "localhost", "::1", ""},
		{[]string{"::ffff:10.0.0.0/104"}, "h", "10.1.1.1", ""},
		{[]string{"fd00::/8"}, "h", "fd12::1", ""},
	}
	for _, c := range cases {
		p, err := parseHostPolicy(c.patterns)
		if err != nil {
			t.Fatalf("parseHostPolicy(%q): %v", c.patterns, err)
		}
		err = p.check(c.host, netip.MustParseAddr(c.addr))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %s at %s refused: %v", c.patterns, c.host, c.addr, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %s at %s: error %v, want one saying %q", c.patterns, c.host, c.addr, err, c.want)
		}
	}
}

func TestHostPolicyBadPatterns(t *testing.T) {
	t.Parallel()
	for _, pat := range []string{"", "http://example.org", "example.org:8080", "10.0.0.0/33", "*.", "*.exa mple.org", "a..b", "example.org/path"} {
		if _, err := parseHostPolicy([]string{pat}); err == nil || !strings.Contains(err.Error(), "--allow-input-host") {
			t.Errorf("parseHostPolicy(%q): error %v, want one naming --allow-input-host", pat, err)
		}
	}
}
