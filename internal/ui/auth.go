package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// Dashboard routes, as the gate admits them: pages for a session (or a
// client's token as a bearer token), the login and the static files for
// anyone; a POST carries a small form.
var (
	pageRoute  = auth.Route{Role: auth.Client, Session: true}
	formRoute  = auth.Route{Role: auth.Client, Session: true, MaxBody: formBody}
	openRoute  = auth.Route{Role: auth.Anyone}
	loginRoute = auth.Route{Role: auth.Anyone, MaxBody: formBody}
	formBody   = int64(64 << 10)
	// jobFormRoute is the new-job form's: its parameters may take 64 KiB
	// as JSON, and more once form-encoded.
	jobFormRoute = auth.Route{Role: auth.Client, Session: true, MaxBody: 8 * formBody}
	loginNeeded  = "log in at /ui/login first"
)

// deny answers a request the gate refused: a page asks for a login, an
// event stream or a form post gets the reason as text.
func deny(w http.ResponseWriter, r *http.Request, e *auth.Error) {
	if e.Status == http.StatusUnauthorized && r.Method == http.MethodGet &&
		!strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/log") {
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	msg := e.Message
	if e.Status == http.StatusUnauthorized {
		msg = loginNeeded
	}
	http.Error(w, msg, e.Status)
}

// guard runs h for a request the gate admitted; a POST must also carry
// its session's form token (a bearer token is never sent by a browser on
// its own, so it needs none).
func (u *UI) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		session := auth.SessionOf(r.Context()) // the gate admitted it
		if r.Method == http.MethodPost && !readForm(w, r) {
			return
		}
		if r.Method == http.MethodPost && session != auth.BearerSession && !u.sessions.CheckForm(session, r.PostFormValue("csrf")) {
			staleForm(w)
			return
		}
		h(w, r)
	}
}

// guardUpload is guard for a POST whose body is a file, not a form: the
// session's form token comes in the X-CSRF-Token header (a page of
// another site cannot set it), and nothing of the body is read without it.
func (u *UI) guardUpload(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		session := auth.SessionOf(r.Context())
		if session != auth.BearerSession && !u.sessions.CheckForm(session, r.Header.Get("X-CSRF-Token")) {
			auth.LetGo(w, r)
			staleForm(w)
			return
		}
		h(w, r)
	}
}

// staleForm refuses a POST without its session's form token.
func staleForm(w http.ResponseWriter) {
	http.Error(w, "this form is stale or did not come from the dashboard; reload the page and try again", http.StatusForbidden)
}

// loginPage shows the login form.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	if u.sessions.Open() {
		http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
		return
	}
	u.render(w, r, 0, "login", "Log in", "", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next  string
	Error string
}

// login checks the token and starts a session. Wrong tokens are limited
// per client address (loginLimiter): past the allowance the answer is
// 429 with Retry-After, and the token is not even looked at.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if u.sessions.Open() {
		http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
		return
	}
	addr := clientAddr(r)
	if d := u.logins.wait(addr); d > 0 {
		secs := int(d.Round(time.Second) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		u.render(w, r, http.StatusTooManyRequests, "login", "Log in", "",
			loginData{Next: safeNext(r.URL.Query().Get("next")), Error: "Too many wrong tokens from your address: wait a few seconds and try again."})
		return
	}
	if !readForm(w, r) {
		return
	}
	next := safeNext(r.PostFormValue("next"))
	token := r.PostFormValue("token")
	caller, e := u.cfg.Gate.CallerOf(r.Context(), token)
	switch {
	case e != nil && e.Status == http.StatusServiceUnavailable:
		u.render(w, r, e.Status, "login", "Log in", "", loginData{Next: next, Error: "The database is not answering; try again in a moment."})
		return
	case e != nil || token == "":
		u.logins.failed(addr)
		u.render(w, r, http.StatusUnauthorized, "login", "Log in", "",
			loginData{Next: next, Error: "That is not a token of this coordinator. Use your account's token, or the CLIENT_AUTH_TOKEN it was started with."})
		return
	}
	tokenHash := "" // the client token's session ends when the token changes
	if domain.LooksLikeAccountToken(token) && !auth.Equal(token, u.cfg.Gate.Tokens().Client) {
		tokenHash = engine.TokenHash(token) // an account's ends when that token is revoked
	}
	exp := time.Now().Add(auth.SessionTTL)
	session, err := u.sessions.Start(r.Context(), exp, caller, tokenHash)
	if err != nil {
		u.fail(w, r, fmt.Errorf("start a session: %w", err))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: auth.SessionCookie, Value: session, Path: "/ui/", Expires: exp,
		HttpOnly: true, Secure: overHTTPS(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session, in every replica, and drops its cookie.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if err := u.sessions.End(r.Context(), auth.SessionOf(r.Context())); err != nil {
		u.fail(w, r, fmt.Errorf("end the session: %w", err))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: overHTTPS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// readForm reads a POST's form, and answers a body that could not be read
// (too large, cut off for arriving too slowly, malformed) itself: a form
// read in part must not pass for an empty one.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if err == nil {
		return true
	}
	status := http.StatusBadRequest
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, "the form could not be read: "+err.Error(), status)
	return false
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
