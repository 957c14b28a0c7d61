package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// SessionCookie names the dashboard's session cookie.
const SessionCookie = "scimesh_session"

// SessionTTL is how long a dashboard login lasts.
const SessionTTL = 12 * time.Hour

// Sessions starts, checks and ends the dashboard's sessions, and signs
// the form tokens that protect its POSTs. A session's cookie holds its
// expiry, a random secret and an HMAC of both under a key derived from
// the client token, so that a forged or stale cookie is refused without
// a lookup and changing the token ends every session. A live session is
// kept in the Registry, shared by every replica, with the account it acts
// as and the token it was started with: logging out, revoking that token
// or disabling the account ends it everywhere at once.
type Sessions struct {
	token    string // the client token; empty: no login
	key      []byte
	registry atomic.Pointer[SessionRegistry] // nil: none yet (SetRegistry)
}

// SetRegistry sets where the live sessions are kept. It may be called
// while requests are served (a coordinator that waited for its database
// sets it once the database answers); until then a session lives until
// it expires, whatever logging out does.
func (s *Sessions) SetRegistry(r SessionRegistry) { s.registry.Store(&r) }

// Registry returns where the live sessions are kept, nil when nowhere.
func (s *Sessions) Registry() SessionRegistry {
	if r := s.registry.Load(); r != nil {
		return *r
	}
	return nil
}

// SessionRegistry keeps the live sessions by ID (ID of the cookie), in
// the database every replica shares.
type SessionRegistry interface {
	// StartSession records session id of account, started with the token
	// whose hash (as account tokens are kept) is tokenHash ("" for the client token).
	StartSession(ctx context.Context, id, account, tokenHash string, expires time.Time) error
	// SessionCaller returns who session id acts as, and false when it is
	// not live: never started, ended, expired, its account disabled or
	// the token it was started with revoked.
	SessionCaller(ctx context.Context, id string) (domain.Caller, bool, error)
	EndSession(ctx context.Context, id string) error
}

// errNoRegistry says that sessions cannot be started or checked yet: the
// database has not answered.
var errNoRegistry = errors.New("auth: the sessions' database has not answered yet")

// ErrNoSession says that a request has no valid session: no cookie, or
// one forged, expired or ended.
var ErrNoSession = errors.New("auth: no valid session")

// NewSessions returns the sessions of a dashboard whose people log in with
// the client token; without one, the key is random and no login is asked.
func NewSessions(clientToken string) *Sessions {
	s := &Sessions{token: clientToken}
	if clientToken != "" {
		k := sha256.Sum256([]byte("scimesh-ui|" + clientToken))
		s.key = k[:]
	} else {
		s.key = make([]byte, 32)
		_, _ = rand.Read(s.key) // never fails on supported platforms
	}
	return s
}

// Open reports whether no login is needed.
func (s *Sessions) Open() bool { return s.token == "" }

func (s *Sessions) sign(v string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// Start starts a session of account c valid until exp, logged in with the
// token whose hash (as account tokens are kept) is tokenHash ("" for the client token), and
// returns its cookie's value.
func (s *Sessions) Start(ctx context.Context, exp time.Time, c domain.Caller, tokenHash string) (string, error) {
	reg := s.Registry()
	if reg == nil {
		return "", errNoRegistry
	}
	e, secret := strconv.FormatInt(exp.Unix(), 10), rand.Text()
	v := e + "." + secret + "." + s.sign("session|"+e+"|"+secret)
	if err := reg.StartSession(ctx, ID(v), c.Account, tokenHash, exp); err != nil {
		return "", err
	}
	return v, nil
}

// End ends the session whose cookie's value is session, in every
// replica. The bearer session and no session have nothing to end.
func (s *Sessions) End(ctx context.Context, session string) error {
	reg := s.Registry()
	if reg == nil || session == "" || session == BearerSession {
		return nil
	}
	return reg.EndSession(ctx, ID(session))
}

// ID is the ID a session is kept by: the sha256 of its cookie's value,
// so that what the database holds cannot be sent back as a cookie.
func ID(session string) string {
	h := sha256.Sum256([]byte(session))
	return hex.EncodeToString(h[:])
}

// BearerSession is the session of a request that carries a token as a
// bearer token instead of a cookie; a browser never sends one on its own,
// so such a request needs no form token.
const BearerSession = "bearer"

// Session returns the request's session cookie's value and who it acts
// as. It is ErrNoSession when the request has no live session, and another
// error when the Registry could not tell.
func (s *Sessions) Session(r *http.Request) (string, domain.Caller, error) {
	v, ok := s.signed(r)
	if !ok {
		return "", domain.Caller{}, ErrNoSession
	}
	reg := s.Registry()
	if reg == nil {
		return "", domain.Caller{}, errNoRegistry
	}
	who, live, err := reg.SessionCaller(r.Context(), ID(v))
	switch {
	case err != nil:
		return "", domain.Caller{}, err
	case !live:
		return "", domain.Caller{}, ErrNoSession
	}
	return v, who, nil
}

// signed returns the value of r's session cookie when this server signed
// it and it has not expired; whether the session still lives only the
// Registry can tell.
func (s *Sessions) signed(r *http.Request) (string, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return "", false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || time.Now().Unix() > exp ||
		!hmac.Equal([]byte(parts[2]), []byte(s.sign("session|"+parts[0]+"|"+parts[1]))) {
		return "", false
	}
	return c.Value, true
}

type sessionKey struct{}

// SessionOf returns the session the Gate admitted a dashboard request
// with (Session's value), "" for none.
func SessionOf(ctx context.Context) string {
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}

// FormToken is the token a form of this session must carry to POST.
func (s *Sessions) FormToken(session string) string { return s.sign("csrf|" + session) }

// CheckForm reports whether got is the form token of session.
func (s *Sessions) CheckForm(session, got string) bool {
	return hmac.Equal([]byte(got), []byte(s.FormToken(session)))
}
