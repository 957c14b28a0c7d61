// Package topology maps shard names to the base URLs of their coordinators,
// as set by --topology or SCIMESH_TOPOLOGY. It knows three forms:
//
//   - "" — a single shard with no peers: no shard has a URL;
//   - "static:s0=http://h0:8080,s1=http://h1:8080" — a closed list of shards;
//   - "pattern:http://scimesh-%s:8080" — any valid shard name, its URL made by
//     putting the name in place of %s; or, restricted by Only to the
//     shards the operator lists (--shards), those alone.
//
// Shard names are 1-32 of [a-z0-9-]. URLs are absolute http or https URLs
// without credentials, query or fragment, stored without a trailing slash so
// a path can be appended. A Topology is immutable and safe for concurrent
// use. The node's own shard is the caller's to know: Parse does not take it,
// and a single-shard topology knows no shard at all.
package topology

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
)

const (
	staticPrefix  = "static:"
	patternPrefix = "pattern:"
)

// Topology says where each shard's coordinator listens. The zero value is
// the single-shard topology.
type Topology struct {
	urls    map[string]string // static form, restricted pattern: shard → base URL
	shards  []string          // static form, restricted pattern: the shards, sorted
	pattern string            // pattern form: a URL holding %s once
}

// Parse reads a topology in one of the package's three forms. Its errors
// are meant for people and show the form expected.
func Parse(s string) (*Topology, error) {
	switch {
	case s == "":
		return &Topology{}, nil
	case strings.HasPrefix(s, staticPrefix):
		return parseStatic(strings.TrimPrefix(s, staticPrefix))
	case strings.HasPrefix(s, patternPrefix):
		return parsePattern(strings.TrimPrefix(s, patternPrefix))
	}
	return nil, fmt.Errorf("topology %q must start with \"static:\" or \"pattern:\", as in static:s0=http://h0:8080,s1=http://h1:8080 or pattern:http://scimesh-%%s:8080", s)
}

func parseStatic(list string) (*Topology, error) {
	t := &Topology{urls: map[string]string{}}
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("topology \"static:\" lists no shards; list SHARD=URL pairs, as in static:s0=http://h0:8080,s1=http://h1:8080")
	}
	for entry := range strings.SplitSeq(list, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(entry), "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("topology entry %q must be SHARD=URL, as in static:s0=http://h0:8080,s1=http://h1:8080", entry)
		}
		if !domain.ValidShard(name) {
			return nil, fmt.Errorf("topology entry %q: shard name %q must be 1-32 characters of a-z 0-9 -", entry, name)
		}
		if _, dup := t.urls[name]; dup {
			return nil, fmt.Errorf("topology lists shard %q twice; give each shard one URL", name)
		}
		u, err := checkURL(raw)
		if err != nil {
			return nil, fmt.Errorf("topology entry %q: %w", entry, err)
		}
		t.urls[name] = u
		t.shards = append(t.shards, name)
	}
	slices.Sort(t.shards)
	return t, nil
}

func parsePattern(p string) (*Topology, error) {
	if strings.Count(p, "%s") != 1 || strings.Count(p, "%") != 1 {
		return nil, fmt.Errorf("topology pattern %q must hold %%s exactly once and no other %%, as in pattern:http://scimesh-%%s:8080", p)
	}
	// A shard name is a valid host label, so checking the URL made from one
	// name checks it for all.
	if _, err := checkURL(strings.Replace(p, "%s", "s0", 1)); err != nil {
		return nil, fmt.Errorf("topology pattern %q: %w", p, err)
	}
	return &Topology{pattern: strings.TrimRight(p, "/")}, nil
}

// Only returns t, a pattern topology, restricted to the shards listed in
// list ("s0,s1,s2"): it knows those alone, as a static topology knows its
// own, their URLs made by the pattern. Without it a pattern knows every
// valid shard name, so whoever submits a tree picks the host the pattern
// makes of a name — and that host is sent the peer token. Only refuses a
// topology that is not the pattern form, whose shards are listed already.
func (t *Topology) Only(list string) (*Topology, error) {
	if t.pattern == "" || t.urls != nil {
		return nil, fmt.Errorf("a list of shards (%q) is for a pattern: topology; a static: one lists its shards itself", list)
	}
	r := &Topology{pattern: t.pattern, urls: map[string]string{}}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if !domain.ValidShard(name) {
			return nil, fmt.Errorf("shard name %q in the list %q must be 1-32 characters of a-z 0-9 -, as in s0,s1,s2", name, list)
		}
		if _, dup := r.urls[name]; dup {
			return nil, fmt.Errorf("the list of shards %q names %q twice", list, name)
		}
		r.urls[name] = strings.Replace(t.pattern, "%s", name, 1)
		r.shards = append(r.shards, name)
	}
	slices.Sort(r.shards)
	return r, nil
}

// checkURL returns raw without trailing slashes when it is an absolute http
// or https URL with a host and no credentials, query or fragment.
func checkURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("URL %q must be an absolute http:// or https:// URL, as in http://h0:8080", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("URL %q must hold no user or password; shards authenticate with PEER_AUTH_TOKEN", raw)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return "", fmt.Errorf("URL %q must have no query or fragment: it is the base the API paths are added to", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// URL returns the base URL of shard's coordinator, without a trailing slash.
// The static form knows its listed shards only, the pattern form every valid
// shard name (or those it was restricted to), the single-shard form none.
func (t *Topology) URL(shard string) (string, bool) {
	switch {
	case t.Open():
		if !domain.ValidShard(shard) {
			return "", false
		}
		return strings.Replace(t.pattern, "%s", shard, 1), true
	default:
		u, ok := t.urls[shard]
		return u, ok
	}
}

// Known reports whether the topology has a URL for shard.
func (t *Topology) Known(shard string) bool {
	_, ok := t.URL(shard)
	return ok
}

// Shards returns the shards of the static form or of a restricted
// pattern, sorted; a fresh slice each call. It returns nil for an open
// pattern, whose shards are open-ended, and an empty slice for the
// single-shard form; Open tells the two apart.
func (t *Topology) Shards() []string {
	if t.Open() {
		return nil
	}
	return append([]string{}, t.shards...)
}

// Open reports whether the topology is the pattern form not restricted by
// Only, which knows every valid shard name.
func (t *Topology) Open() bool { return t.pattern != "" && t.urls == nil }

// String returns the topology in the form Parse reads: URLs without trailing
// slashes, static shards sorted, "" for the single-shard form. A pattern
// is given as such; the list it was restricted to is not part of it.
func (t *Topology) String() string {
	switch {
	case t.pattern != "":
		return patternPrefix + t.pattern
	case len(t.shards) == 0:
		return ""
	}
	var b strings.Builder
	b.WriteString(staticPrefix)
	for i, s := range t.shards {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s + "=" + t.urls[s])
	}
	return b.String()
}

// PlainRemote reports whether base is a plain http:// URL to a host that is
// not loopback (localhost, 127.0.0.0/8, ::1): whatever is sent there, a
// token included, crosses the network in the clear. Loopback never leaves
// the machine, so tests and single-machine meshes may use plain HTTP.
func PlainRemote(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return err != nil // an unreadable URL is no promise of anything
	}
	return !Loopback(u.Hostname())
}

// Loopback reports whether host, a name or an IP address, is this machine:
// "localhost", or an address of 127.0.0.0/8 or ::1.
func Loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
