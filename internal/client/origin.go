package client

import (
	"net"
	"net/url"
	"strings"
)

// Where the token may go. The coordinator may share its scheme, host and
// port with other applications — a reverse proxy that maps
// https://gw/scimesh/ to it and https://gw/other/ elsewhere — so the token
// goes only below the coordinator's own base path, and a task's input
// only when it is the one URL the coordinator issues for it
// ("/tasks/{id}/input" resolved against the base). Both tests read the
// path as it goes on the wire and refuse what a proxy could route
// elsewhere after decoding or normalizing it: dot segments, escaped '/',
// '\' and '.', ';' (path parameters, as in "..;"), user info.

// coordinatorPath returns the escaped path of u below the coordinator's
// base path ("" for the base itself, else starting with "/") when u leads
// to the coordinator: its scheme, host and port, no user info, and a path
// under the base's that no proxy could take out of it.
func (c *Client) coordinatorPath(u *url.URL) (string, bool) {
	if c.base == nil || u.User != nil || u.Opaque != "" ||
		!strings.EqualFold(u.Scheme, c.base.Scheme) || !strings.EqualFold(hostPort(u), hostPort(c.base)) {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimRight(c.base.EscapedPath(), "/"))
	if !ok || rest != "" && rest[0] != '/' || strings.ContainsAny(rest, `;\`) {
		return "", false
	}
	lower := strings.ToLower(rest)
	for _, esc := range []string{"%2e", "%2f", "%5c"} {
		if strings.Contains(lower, esc) {
			return "", false
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "." || seg == ".." {
			return "", false
		}
	}
	return rest, true
}

// isTaskInput reports whether u is where the coordinator serves a task's
// input: exactly its base URL followed by "/tasks/{id}/input", with no
// query, the ID one segment of the characters task IDs hold.
func (c *Client) isTaskInput(u *url.URL) bool {
	rest, ok := c.coordinatorPath(u)
	if !ok || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return false
	}
	id, hasPrefix := strings.CutPrefix(rest, "/tasks/")
	id, hasSuffix := strings.CutSuffix(id, "/input")
	if !hasPrefix || !hasSuffix || id == "" {
		return false
	}
	for _, r := range id {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~:", r)) {
			return false
		}
	}
	return true
}

// hostPort is u's host with the scheme's default port made explicit, so
// that http://h and http://h:80 are the same origin.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return net.JoinHostPort(u.Hostname(), "80")
	case "https":
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return u.Host
}
