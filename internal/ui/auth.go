package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sessionCookie names the dashboard's session cookie.
const sessionCookie = "scimesh_session"

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

// auth signs and checks sessions and the tokens that protect POSTs.
type auth struct {
	token string // the client token; empty: no login
	key   []byte // signs sessions and CSRF tokens
}

func newAuth(token string) *auth {
	a := &auth{token: token}
	if token != "" {
		k := sha256.Sum256([]byte("scimesh-ui|" + token))
		a.key = k[:]
	} else {
		a.key = make([]byte, 32)
		_, _ = rand.Read(a.key) // never fails on supported platforms
	}
	return a
}

func (a *auth) open() bool { return a.token == "" }

func (a *auth) sign(s string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

// newSession returns a session cookie's value, valid until exp.
func (a *auth) newSession(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + a.sign("session|"+e)
}

// session returns the request's session: its cookie's value, "bearer" for a
// request with the client token as a bearer token, "" when no login is
// needed. ok is false when the request has no valid one.
func (a *auth) session(r *http.Request) (string, bool) {
	if a.open() {
		return "", true
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return "bearer", subtle.ConstantTimeCompare([]byte(tok), []byte(a.token)) == 1
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	e, sig, ok := strings.Cut(c.Value, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil || time.Now().Unix() > exp {
		return "", false
	}
	if !hmac.Equal([]byte(sig), []byte(a.sign("session|"+e))) {
		return "", false
	}
	return c.Value, true
}

// csrf is the token a form of this session must carry to POST.
func (a *auth) csrf(session string) string { return a.sign("csrf|" + session) }

// checkPost refuses a POST that did not come from this dashboard's pages:
// from another origin, or without the session's form token.
func (a *auth) checkPost(r *http.Request, session string) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	if session == "bearer" {
		return nil // a bearer token is never sent by a browser on its own
	}
	got := r.PostFormValue("csrf")
	if !hmac.Equal([]byte(got), []byte(a.csrf(session))) {
		return errors.New("this form is stale or did not come from the dashboard; reload the page and try again")
	}
	return nil
}

// crossOrigin refuses requests a browser marks as sent by another site
// (Sec-Fetch-Site, else Origin against Host).
var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin refuses a request a browser sent from another site.
func sameOrigin(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return errors.New("refused: the request came from another site")
	}
	return nil
}

// loginPage shows the login form.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	if u.auth.open() {
		http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
		return
	}
	u.render(w, r, 0, "login", "Log in", "", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next  string
	Error string
}

// login checks the token and starts a session.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if u.auth.open() {
		http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
		return
	}
	if err := sameOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	tok := r.PostFormValue("token")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(u.auth.token)) != 1 {
		u.render(w, r, http.StatusUnauthorized, "login", "Log in", "",
			loginData{Next: next, Error: "That is not the client token. Use the CLIENT_AUTH_TOKEN this coordinator was started with."})
		return
	}
	exp := time.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: u.auth.newSession(exp), Path: "/ui/", Expires: exp,
		HttpOnly: true, Secure: overHTTPS(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: overHTTPS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// overHTTPS says whether the browser reached the dashboard over HTTPS:
// directly, or through a proxy that ends TLS and says so in
// X-Forwarded-Proto. The session cookie is then marked Secure, so that the
// browser never sends it over plain HTTP. A forged header can only make a
// client's own cookie stricter.
func overHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext keeps a redirect target inside the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/ui/jobs"
	}
	return next
}
