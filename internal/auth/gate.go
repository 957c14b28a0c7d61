package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Route is what a route asks of its callers.
type Route struct {
	// Role is who may call it.
	Role Role
	// Session also admits the dashboard's session cookie, as the client.
	Session bool
	// MaxBody bounds the request body in bytes as the route reads it; 0
	// takes no body. A larger declared body is refused before it is read;
	// one that is not declared is cut off at the bound.
	MaxBody int64
	// JSON asks for a JSON content type whenever there is a body.
	JSON bool
	// Stream marks a body that streams for the life of the call (a
	// bidirectional RPC): it is bounded per message by its handler, never
	// as a whole, and never cut off for being slow.
	Stream bool
}

// DenyFunc writes the Gate's refusal of r in the transport's own form.
type DenyFunc func(w http.ResponseWriter, r *http.Request, e *Error)

// Gate checks every request of a route before the route's handler runs:
// see the package comment. One Gate serves all the transports of a server.
type Gate struct {
	tokens   Tokens
	sessions *Sessions
	accounts atomic.Pointer[Accounts] // nil: none yet (Bind)
	cross    *http.CrossOriginProtection

	// BodyGrace and BodyRate cut off a body that trickles in: a body must
	// have arrived at BodyRate bytes a second on average, after the first
	// BodyGrace. Defaults: 10 s and 16 KiB/s; change before serving.
	BodyGrace time.Duration
	BodyRate  int64
}

// NewGate returns the gate of a server with tokens.
func NewGate(tokens Tokens) *Gate {
	return &Gate{
		tokens: tokens, sessions: NewSessions(tokens.Client), cross: http.NewCrossOriginProtection(),
		BodyGrace: 10 * time.Second, BodyRate: 16 << 10,
	}
}

// Tokens returns the tokens the gate checks.
func (g *Gate) Tokens() Tokens { return g.tokens }

// Sessions returns the dashboard's sessions.
func (g *Gate) Sessions() *Sessions { return g.sessions }

// Guard returns h behind the gate: a request that may not call the route
// rt is refused with deny, and the body h reads is bounded as rt says. A
// client request's context carries who it acts as (domain.CallerOf).
func (g *Gate) Guard(rt Route, deny DenyFunc, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session, caller, worker, e := g.admit(r, rt)
		if e != nil {
			if r.ContentLength != 0 {
				LetGo(w, r) // nothing of the body is read, and nothing will be
			}
			deny(w, r, e)
			return
		}
		if rt.Session {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, session))
		}
		if rt.Session || rt.Role == Client {
			r = r.WithContext(domain.WithCaller(r.Context(), caller))
		}
		if rt.Role == Worker {
			r = r.WithContext(domain.WithPrincipal(r.Context(), worker))
		}
		if r.Body != nil && r.Body != http.NoBody && !rt.Stream {
			r.Body = g.bound(w, r, rt.MaxBody)
		}
		h.ServeHTTP(w, r)
	})
}

// drainTime is how long what is left of a body that will not be read may
// still take to arrive once the answer has gone out, before the
// connection is closed.
const drainTime = time.Second

// LetGo makes sure that the answer to a request whose body will not be
// read to its end goes out at once and that the connection is then let
// go. Left alone, net/http would read what is left of a small body, at
// the client's pace and without a deadline, before it answered (HTTP/1
// when the connection stays open) or before it let the connection go: a
// client that trickles its body would hold the connection for as long as
// it likes. An HTTP/1 connection is closed after the answer, and what is
// left of the body gets drainTime to arrive (so that a client still
// sending reads the answer before the close resets the connection); an
// HTTP/2 stream is reset instead.
func LetGo(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainTime))
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// admit says whether r may call rt, reading nothing of its body, and
// returns its dashboard session when rt admits one, who it acts as when
// rt is a client's, and which worker when rt is a worker's.
func (g *Gate) admit(r *http.Request, rt Route) (session string, caller domain.Caller, worker domain.Principal, _ *Error) {
	if err := g.cross.Check(r); err != nil {
		return "", caller, worker, &Error{Status: http.StatusForbidden, Code: CodePermissionDenied,
			Message: "refused a cross-site request: a page of another site may not call this coordinator"}
	}
	var e *Error
	switch {
	case rt.Session:
		session, caller, e = g.dashboard(r)
	case rt.Role == Client:
		caller, e = g.CallerOf(r.Context(), Bearer(r.Header))
	case rt.Role == Worker:
		worker, e = g.workerOf(r)
	default:
		e = g.check(r, rt.Role)
	}
	if e != nil {
		return "", caller, worker, e
	}
	if e := bodyFits(r, rt); e != nil {
		return "", caller, worker, e
	}
	return session, caller, worker, nil
}

// dashboard returns the session of a dashboard request and who it acts
// as: a bearer token's account (BearerSession), or its session cookie's.
func (g *Gate) dashboard(r *http.Request) (string, domain.Caller, *Error) {
	if _, ok := r.Header["Authorization"]; ok {
		c, e := g.CallerOf(r.Context(), Bearer(r.Header))
		return BearerSession, c, e
	}
	if g.sessions.Open() {
		return "", adminCaller, nil
	}
	session, c, err := g.sessions.Session(r)
	switch {
	case errors.Is(err, ErrNoSession):
		return "", c, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "log in to the dashboard first (/ui/login), or send your token as 'Authorization: Bearer TOKEN'"}
	case err != nil:
		return "", c, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the sessions could not be checked: the database is not answering; retry later"}
	}
	return session, c, nil
}

// check is Tokens.check, which also knows an account's token on a worker
// or peer route for a token of the wrong role (403), not an unknown one.
func (g *Gate) check(r *http.Request, want Role) *Error {
	e := g.tokens.check(r.Header, want)
	if e == nil || e.Status != http.StatusUnauthorized {
		return e
	}
	tok := Bearer(r.Header)
	a := g.accountsOf()
	switch {
	case a == nil:
	case domain.LooksLikeAccountToken(tok):
		if _, err := a.Authenticate(r.Context(), tok); err == nil {
			return &Error{Status: http.StatusForbidden, Code: CodePermissionDenied,
				Message: "an account's token may not call this route; it needs the " + want.String() + " token"}
		}
	case domain.LooksLikeWorkerKey(tok):
		if _, err := a.AuthenticateWorker(r.Context(), tok); err == nil {
			return &Error{Status: http.StatusForbidden, Code: CodePermissionDenied,
				Message: "a worker key may not call this route; it needs the " + want.String() + " token"}
		}
	}
	return e
}

// bodyFits refuses a request whose declared body rt does not take, or not
// as JSON when rt asks for it.
func bodyFits(r *http.Request, rt Route) *Error {
	if !rt.Stream && r.ContentLength > rt.MaxBody {
		msg := fmt.Sprintf("the request body is %d bytes; this route takes at most %d", r.ContentLength, rt.MaxBody)
		if rt.MaxBody == 0 {
			msg = "this route takes no request body; send none"
		}
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: msg}
	}
	if rt.JSON && r.ContentLength != 0 {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument,
				Message: "send the request body as JSON, with 'Content-Type: application/json'"}
		}
	}
	return nil
}

// Identify refuses r (401) unless it carries a token of some role or a
// dashboard session, or the server leaves a role's routes open (no client
// or no worker token). It is for answers that need no particular role but
// are not for strangers: a coordinator whose database has not answered yet
// tells its callers so, and tells strangers only to authenticate.
func (g *Gate) Identify(r *http.Request) *Error {
	if g.tokens.Client == "" || g.tokens.Worker == "" {
		return nil
	}
	if _, ok := g.sessions.signed(r); ok {
		return nil
	}
	tok := Bearer(r.Header)
	switch {
	case tok == "":
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "missing bearer token: send your token as 'Authorization: Bearer TOKEN'"}
	case domain.LooksLikeAccountToken(tok), domain.LooksLikeWorkerKey(tok):
		return nil // an account's or a worker key, maybe: only the database can tell, and it has not answered
	}
	for _, n := range g.tokens.named() {
		if Equal(tok, n.value) {
			return nil
		}
	}
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "unknown token: check the token you were given"}
}

// SlowBodyError is the error a handler reads from a body that trickled
// in and was cut off.
type SlowBodyError struct {
	Rate  int64         // bytes a second asked for
	Grace time.Duration // before the rate counts
}

// Error implements error.
func (e *SlowBodyError) Error() string {
	return fmt.Sprintf("the request body arrived too slowly (under %d KiB/s after the first %v) and was cut off; send it faster",
		e.Rate>>10, e.Grace)
}

// bound returns r's body cut off after limit bytes (with
// *http.MaxBytesError) and when it arrives too slowly (with
// *SlowBodyError), by read deadlines on the connection that move on as
// the body arrives; once the body is read to its end the deadline is
// lifted, so that a long-poll or a stream can then wait as long as it
// needs. A body cut off lets its connection go (LetGo).
func (g *Gate) bound(w http.ResponseWriter, r *http.Request, limit int64) io.ReadCloser {
	b := &boundBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), w: w, r: r, rc: http.NewResponseController(w),
		g: g, start: time.Now()}
	b.deadline = b.start.Add(g.BodyGrace)
	if b.rc.SetReadDeadline(b.deadline) != nil {
		b.done = true // the connection has no deadlines: only the bound holds
	}
	return b
}

type boundBody struct {
	io.ReadCloser
	w        http.ResponseWriter
	r        *http.Request
	rc       *http.ResponseController
	g        *Gate
	start    time.Time
	n        int64
	deadline time.Time
	done     bool
}

func (b *boundBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if b.done {
		return n, err
	}
	if err != nil {
		b.done = true
		switch {
		case err == io.EOF:
			_ = b.rc.SetReadDeadline(time.Time{})
		case errors.Is(err, os.ErrDeadlineExceeded):
			LetGo(b.w, b.r)
			err = &SlowBodyError{Rate: b.g.BodyRate, Grace: b.g.BodyGrace}
		}
		return n, err
	}
	// The deadline moves on by the time the bytes so far earned; it is
	// set again only when it moved by a second, to spare system calls.
	d := b.start.Add(b.g.BodyGrace + time.Duration(float64(b.n)/float64(b.g.BodyRate)*float64(time.Second)))
	if d.Sub(b.deadline) >= time.Second {
		b.deadline = d
		_ = b.rc.SetReadDeadline(d)
	}
	return n, nil
}
