// Package auth is the coordinator's one authentication layer: the bearer
// tokens of the three roles, which role each route needs, the
// constant-time comparison, the dashboard's signed sessions, and the Gate
// that every transport (REST, gRPC, gRPC-Web, Connect, the dashboard and
// its event streams) puts in front of each of its routes.
//
// The Gate decides before a handler reads a byte of the body: it refuses
// cross-site requests, checks the caller's token or session, refuses a
// declared body larger than the route takes, and hands the handler a body
// that is cut off past the route's bound or when it trickles in. It knows
// nothing of jobs or tasks; transports say how a refusal is written.
package auth

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// Role is who may call a route.
type Role int

const (
	// Anyone may call the route; no token is asked.
	Anyone Role = iota
	// Client is a person or program that submits and reads jobs
	// (CLIENT_AUTH_TOKEN).
	Client
	// Worker is a worker daemon (WORKER_AUTH_TOKEN).
	Worker
	// Peer is another shard's coordinator (PEER_AUTH_TOKEN).
	Peer
)

// String names the role as error messages do.
func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Worker:
		return "worker"
	case Peer:
		return "peer"
	}
	return "anyone"
}

// Tokens are the bearer tokens of each role. An empty client or worker
// token leaves that role's routes open, which the server allows on
// loopback only. An empty peer token leaves the peer routes open only on a
// server with no token at all; otherwise they admit no one.
type Tokens struct {
	Client string
	Worker string
	Peer   string
}

// MinTokenBytes is the length under which a token is weak enough to warn
// about.
const MinTokenBytes = 16

// Open reports whether the server runs without client and worker tokens
// (then only on loopback).
func (t Tokens) Open() bool { return t.Client == "" && t.Worker == "" }

// Validate refuses tokens that would let one role pass for another: two
// roles with the same token.
func (t Tokens) Validate() error {
	named := t.named()
	for i, a := range named {
		for _, b := range named[i+1:] {
			if a.value != "" && Equal(a.value, b.value) {
				return fmt.Errorf("%s and %s are the same token, so either role could act as the other; "+
					"give each role its own random token (e.g. openssl rand -hex 32)", a.name, b.name)
			}
		}
	}
	return nil
}

// Short names the tokens that are set but shorter than MinTokenBytes.
func (t Tokens) Short() []string {
	var short []string
	for _, n := range t.named() {
		if n.value != "" && len(n.value) < MinTokenBytes {
			short = append(short, n.name)
		}
	}
	return short
}

type namedToken struct{ name, value string }

func (t Tokens) named() []namedToken {
	return []namedToken{{"CLIENT_AUTH_TOKEN", t.Client}, {"WORKER_AUTH_TOKEN", t.Worker}, {"PEER_AUTH_TOKEN", t.Peer}}
}

func (t Tokens) of(r Role) string {
	switch r {
	case Client:
		return t.Client
	case Worker:
		return t.Worker
	case Peer:
		return t.Peer
	}
	return ""
}

// Equal reports whether a is the token b, in time that does not depend on
// where they differ. No token equals an empty b.
func Equal(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Bearer returns the token of an "Authorization: Bearer TOKEN" header,
// or "" without one.
func Bearer(h http.Header) string {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return tok
}

// check says whether a request with header h may call a route of role
// want: nil, or the refusal (401 for a missing or unknown token, 403 for a
// token of another role).
func (t Tokens) check(h http.Header, want Role) *Error {
	need := t.of(want)
	if want == Anyone || need == "" && (want != Peer || t.Open()) {
		return nil
	}
	tok := Bearer(h)
	switch {
	case tok == "":
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "missing bearer token: send the " + want.String() + " token as 'Authorization: Bearer TOKEN'"}
	case Equal(tok, need):
		return nil
	}
	for _, n := range t.named() {
		if Equal(tok, n.value) {
			msg := "this token may not call this route; it needs the " + want.String() + " token"
			if need == "" {
				msg = "this coordinator has no PEER_AUTH_TOKEN, so its peer service admits no one; set the same PEER_AUTH_TOKEN on every shard"
			}
			return &Error{Status: http.StatusForbidden, Code: CodePermissionDenied, Message: msg}
		}
	}
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "unknown token: check the token you were given"}
}

// Error is a refusal of the Gate, as the REST API words it; other
// transports translate Status into their own codes.
type Error struct {
	Status  int    // the HTTP status
	Code    string // the REST API's error code
	Message string // for people: what was wrong and what to do
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// The error codes of refusals (SPEC §3).
const (
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeTooLarge         = "too_large"
	CodeInvalidArgument  = "invalid_argument"
	CodeUnavailable      = "unavailable"
)
