package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SessionCookie names the dashboard's session cookie.
const SessionCookie = "scimesh_session"

// SessionTTL is how long a dashboard login lasts.
const SessionTTL = 12 * time.Hour

// Sessions signs and checks the dashboard's sessions and the form tokens
// that protect its POSTs. Sessions are stateless — an expiry and an HMAC
// under a key derived from the client token — so every replica accepts
// them, and changing the token ends every session.
type Sessions struct {
	token string // the client token; empty: no login
	key   []byte
}

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

// Login reports whether token is the client token people log in with.
func (s *Sessions) Login(token string) bool { return Equal(token, s.token) }

func (s *Sessions) sign(v string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// New returns a session cookie's value, valid until exp.
func (s *Sessions) New(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + s.sign("session|"+e)
}

// BearerSession is the session of a request that carries the client token
// as a bearer token instead of a cookie; a browser never sends one on its
// own, so such a request needs no form token.
const BearerSession = "bearer"

// Session returns the request's session: its cookie's value, BearerSession
// for a request with the client token as a bearer token, "" when no login
// is needed. ok is false when the request has no valid one.
func (s *Sessions) Session(r *http.Request) (string, bool) {
	if s.Open() {
		return "", true
	}
	if _, ok := r.Header["Authorization"]; ok {
		return BearerSession, Equal(Bearer(r.Header), s.token)
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return "", false
	}
	e, sig, ok := strings.Cut(c.Value, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil || time.Now().Unix() > exp {
		return "", false
	}
	if !hmac.Equal([]byte(sig), []byte(s.sign("session|"+e))) {
		return "", false
	}
	return c.Value, true
}

// FormToken is the token a form of this session must carry to POST.
func (s *Sessions) FormToken(session string) string { return s.sign("csrf|" + session) }

// CheckForm reports whether got is the form token of session.
func (s *Sessions) CheckForm(session, got string) bool {
	return hmac.Equal([]byte(got), []byte(s.FormToken(session)))
}
