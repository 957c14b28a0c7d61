package topology

import (
	"slices"
	"strings"
	"testing"
)

func TestTopologyParse(t *testing.T) {
	t.Parallel()
	type lookup struct {
		shard string
		url   string // "" when unknown
	}
	tests := []struct {
		name    string
		in      string
		shards  []string
		open    bool
		str     string
		lookups []lookup
	}{
		{
			name: "single shard", in: "", shards: []string{}, str: "",
			lookups: []lookup{{"s0", ""}, {"", ""}},
		},
		{
			name: "static", in: "static:s1=http://h1:8080,s0=https://h0.example.org/mesh/",
			shards: []string{"s0", "s1"}, str: "static:s0=https://h0.example.org/mesh,s1=http://h1:8080",
			lookups: []lookup{{"s0", "https://h0.example.org/mesh"}, {"s1", "http://h1:8080"}, {"s2", ""}, {"S0", ""}},
		},
		{
			name: "static one", in: "static:a-b-9=http://10.0.0.1", shards: []string{"a-b-9"}, str: "static:a-b-9=http://10.0.0.1",
			lookups: []lookup{{"a-b-9", "http://10.0.0.1"}, {"s0", ""}},
		},
		{
			name: "static spaces", in: "static: s0 = http://h0:8080 , s1=http://[::1]:8081",
			shards: []string{"s0", "s1"}, str: "static:s0=http://h0:8080,s1=http://[::1]:8081",
			lookups: []lookup{{"s0", "http://h0:8080"}, {"s1", "http://[::1]:8081"}},
		},
		{
			name: "pattern", in: "pattern:http://scimesh-%s:8080", open: true, str: "pattern:http://scimesh-%s:8080",
			lookups: []lookup{
				{"s0", "http://scimesh-s0:8080"}, {"eu-west-3", "http://scimesh-eu-west-3:8080"},
				{"S0", ""}, {"", ""}, {strings.Repeat("a", 33), ""}, {"a/b", ""},
			},
		},
		{
			name: "pattern in path", in: "pattern:https://mesh.example.org/%s/", open: true, str: "pattern:https://mesh.example.org/%s",
			lookups: []lookup{{"s7", "https://mesh.example.org/s7"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q) = %v, want a topology", tt.in, err)
			}
			got := top.Shards()
			if (got == nil) != (tt.shards == nil) || !slices.Equal(got, tt.shards) {
				t.Errorf("Shards() = %#v, want %#v", got, tt.shards)
			}
			if top.Open() != tt.open {
				t.Errorf("Open() = %v, want %v", top.Open(), tt.open)
			}
			if s := top.String(); s != tt.str {
				t.Errorf("String() = %q, want %q", s, tt.str)
			}
			for _, l := range tt.lookups {
				u, ok := top.URL(l.shard)
				if u != l.url || ok != (l.url != "") || top.Known(l.shard) != ok {
					t.Errorf("URL(%q) = %q, %v, Known = %v; want %q", l.shard, u, ok, top.Known(l.shard), l.url)
				}
			}
			again, err := Parse(top.String())
			if err != nil || again.String() != top.String() {
				t.Errorf("Parse(String()) = %v, %v; want the same topology", again, err)
			}
		})
	}
}

func TestTopologyShardsIsACopy(t *testing.T) {
	t.Parallel()
	top, err := Parse("static:s0=http://h0,s1=http://h1")
	if err != nil {
		t.Fatal(err)
	}
	top.Shards()[0] = "zz"
	if got := top.Shards(); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("Shards() = %v after a caller wrote to it, want [s0 s1]", got)
	}
}

// TestTopologyOnly: a pattern restricted to a list knows those shards
// alone; a list for another form, or with a bad or repeated name, is
// refused.
func TestTopologyOnly(t *testing.T) {
	t.Parallel()
	pattern, err := Parse("pattern:http://scimesh-%s:8080")
	if err != nil {
		t.Fatal(err)
	}
	top, err := pattern.Only(" s1, s0 ,eu-2")
	if err != nil {
		t.Fatalf("Only: %v", err)
	}
	if got := top.Shards(); !slices.Equal(got, []string{"eu-2", "s0", "s1"}) || top.Open() {
		t.Errorf("restricted pattern: Shards() = %v, Open() = %v; want [eu-2 s0 s1], false", got, top.Open())
	}
	if u, ok := top.URL("s1"); !ok || u != "http://scimesh-s1:8080" {
		t.Errorf("URL(s1) = %q, %v; want http://scimesh-s1:8080", u, ok)
	}
	for _, s := range []string{"s7", "evil", "S0", ""} {
		if u, ok := top.URL(s); ok || top.Known(s) {
			t.Errorf("URL(%q) = %q, %v; want unknown: not in the list", s, u, ok)
		}
	}
	if top.String() != "pattern:http://scimesh-%s:8080" || !pattern.Open() || !pattern.Known("s7") {
		t.Errorf("String() = %q, and the pattern itself open %v: want the pattern, still open", top.String(), pattern.Open())
	}
	static, _ := Parse("static:s0=http://h0")
	for _, c := range []struct {
		top        *Topology
		list, want string
	}{
		{static, "s0", "is for a pattern: topology"},
		{&Topology{}, "s0", "is for a pattern: topology"},
		{top, "s0", "is for a pattern: topology"},
		{pattern, "s0,S1", `shard name "S1"`},
		{pattern, "s0,,s1", `shard name ""`},
		{pattern, "s0,a.b", `shard name "a.b"`},
		{pattern, "s0,s0", `names "s0" twice`},
	} {
		if _, err := c.top.Only(c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Only(%q) on %q: %v, want an error saying %q", c.list, c.top.String(), err, c.want)
		}
	}
}

func TestTopologyZeroValue(t *testing.T) {
	t.Parallel()
	var top Topology
	if top.Known("s0") || top.String() != "" || top.Open() || len(top.Shards()) != 0 {
		t.Fatalf("zero Topology = %+v, want the single-shard topology", top)
	}
}

func TestTopologyParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"no prefix", "s0=http://h0:8080", `must start with "static:" or "pattern:"`},
		{"bad prefix", "dns:scimesh", `must start with "static:" or "pattern:"`},
		{"static empty", "static:", "lists no shards"},
		{"static blank", "static:  ", "lists no shards"},
		{"no equals", "static:s0", `entry "s0" must be SHARD=URL`},
		{"no url", "static:s0=", `entry "s0=" must be SHARD=URL`},
		{"no name", "static:=http://h0", `entry "=http://h0" must be SHARD=URL`},
		{"trailing comma", "static:s0=http://h0,", `entry "" must be SHARD=URL`},
		{"empty entry", "static:s0=http://h0,,s1=http://h1", `entry "" must be SHARD=URL`},
		{"upper shard", "static:S0=http://h0", `shard name "S0" must be 1-32 characters`},
		{"underscore shard", "static:s_0=http://h0", `shard name "s_0"`},
		{"long shard", "static:" + strings.Repeat("a", 33) + "=http://h0", "must be 1-32 characters"},
		{"duplicate", "static:s0=http://h0,s1=http://h1,s0=http://h2", `lists shard "s0" twice`},
		{"relative url", "static:s0=h0:8080", `URL "h0:8080" must be an absolute http:// or https:// URL`},
		{"path url", "static:s0=/api", `URL "/api" must be an absolute`},
		{"ftp url", "static:s0=ftp://h0", `URL "ftp://h0" must be an absolute`},
		{"no host", "static:s0=http://", `URL "http://" must be an absolute`},
		{"opaque", "static:s0=http:h0", `URL "http:h0" must be an absolute`},
		{"bad url", "static:s0=http://h0:port", `URL "http://h0:port" must be an absolute`},
		{"query", "static:s0=http://h0?x=1", "no query or fragment"},
		{"empty query", "static:s0=http://h0?", "no query or fragment"},
		{"fragment", "static:s0=http://h0#f", "no query or fragment"},
		{"credentials", "static:s0=http://u:p@h0", "no user or password"},
		{"pattern no verb", "pattern:http://scimesh:8080", "must hold %s exactly once"},
		{"pattern two verbs", "pattern:http://%s-%s:8080", "must hold %s exactly once"},
		{"pattern other verb", "pattern:http://scimesh-%s:%d", "and no other %"},
		{"pattern escaped percent", "pattern:http://scimesh-%s/100%%", "and no other %"},
		{"pattern %v", "pattern:http://scimesh-%v:8080", "must hold %s exactly once"},
		{"pattern relative", "pattern:scimesh-%s:8080", "must be an absolute"},
		{"pattern scheme", "pattern:%s://h0", "must be an absolute"},
		{"pattern query", "pattern:http://h0/?shard=%s", "no query or fragment"},
		{"pattern empty", "pattern:", "must hold %s exactly once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top, err := Parse(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, %v; want an error containing %q", tt.in, top, err, tt.want)
			}
			if top != nil {
				t.Fatalf("Parse(%q) returned %v with its error", tt.in, top)
			}
		})
	}
}

func TestPlainRemote(t *testing.T) {
	t.Parallel()
	for base, want := range map[string]bool{
		"http://scimesh-s7:8080":   true,
		"http://10.0.0.7:8080":     true,
		"http://[2001:db8::1]:80":  true,
		"http://localhost.evil.io": true,
		"https://scimesh-s7:8443":  false,
		"http://localhost:8080":    false,
		"http://LOCALHOST.:8080":   false,
		"http://127.0.0.1:8080":    false,
		"http://127.9.9.9:1/s0":    false,
		"http://[::1]:8080":        false,
		"http://%zz":               true, // unreadable: no promise
	} {
		if got := PlainRemote(base); got != want {
			t.Errorf("PlainRemote(%q) = %v, want %v", base, got, want)
		}
	}
}
