// Package ui is the dashboard under /ui/: server-rendered pages from
// templates embedded in the binary, a little plain JavaScript for the live
// parts (Server-Sent Events), nothing loaded from elsewhere and no build
// step. It reads and acts through the engine, like the REST API, and holds
// no rules of its own.
//
// With a client token configured, a person logs in once with an account's
// token (or the client token, the admin's) and gets a session cookie
// (HttpOnly, SameSite=Strict) signed with a key derived from the client
// token, so changing that token ends every session; the session is kept in
// the database with its account, so that logging out, revoking the token
// or disabling the account ends it in every replica, and every page shows
// what that account may see. Wrong tokens are limited per client address.
// Requests that change something (cancel, retry, log out, a new job and
// its upload) are POSTs that carry a token derived from the session (an
// upload, whose body is the file, in the X-CSRF-Token header) and come
// from the dashboard's own origin; others are refused.
package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/topology"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config says who may use the dashboard and where the other shards are.
type Config struct {
	// Gate admits the dashboard's callers: people log in with its client
	// token; without one the dashboard is open (the server then listens on
	// loopback only). Nil is a gate without tokens.
	Gate *auth.Gate
	// Topology says where the other shards are, for the shards page and
	// links to their tasks; nil for a single shard.
	Topology *topology.Topology
	// Logger receives errors the pages could not show; default slog.Default().
	Logger *slog.Logger
	// MaxUpload bounds a file uploaded from the new-job page, in bytes:
	// the REST API's bound (httpapi.Server.MaxUpload), so that both take
	// the same files. 0 takes none.
	MaxUpload int64
}

// UI serves the dashboard.
type UI struct {
	e        *engine.Engine
	cfg      Config
	sessions *auth.Sessions
	log      *slog.Logger
	logins   *loginLimiter
	pages    map[string]*template.Template
	mux      *http.ServeMux
	patterns []string     // of the routes New registered, in order
	http     *http.Client // for peers' reachability
}

// New returns the dashboard of e, to be mounted at /ui/.
func New(e *engine.Engine, cfg Config) (*UI, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Topology == nil {
		cfg.Topology = &topology.Topology{}
	}
	if cfg.Gate == nil {
		cfg.Gate = auth.NewGate(auth.Tokens{})
	}
	u := &UI{e: e, cfg: cfg, sessions: cfg.Gate.Sessions(), logins: newLoginLimiter(), log: cfg.Logger, mux: http.NewServeMux(),
		http: &http.Client{Timeout: 2 * time.Second}}
	if e != nil {
		cfg.Gate.Bind(e) // accounts and sessions live in the database, shared by every replica
	}
	if err := u.parse(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	handle := func(pattern string, rt auth.Route, h http.Handler) {
		u.mux.Handle(pattern, cfg.Gate.Guard(rt, deny, h))
		u.patterns = append(u.patterns, pattern)
	}
	page := func(pattern string, h http.HandlerFunc) { handle(pattern, pageRoute, u.guard(h)) }
	handle("GET /ui/static/", openRoute, http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	handle("GET /ui/login", openRoute, http.HandlerFunc(u.loginPage))
	handle("POST /ui/login", loginRoute, http.HandlerFunc(u.login))
	handle("POST /ui/logout", formRoute, u.guard(u.logout))
	handle("GET /ui/{$}", openRoute, http.RedirectHandler("/ui/jobs", http.StatusSeeOther))
	page("GET /ui/jobs", u.jobs)
	page("GET /ui/jobs/new", u.newJob)
	handle("POST /ui/jobs/new", jobFormRoute, u.guard(u.createJob))
	handle("POST /ui/upload", auth.Route{Role: auth.Client, Session: true, MaxBody: cfg.MaxUpload}, u.guardUpload(u.upload))
	page("GET /ui/jobs/{id}", u.job)
	page("GET /ui/jobs/{id}/events", u.jobEvents)
	page("GET /ui/jobs/{id}/result", u.result)
	handle("POST /ui/jobs/{id}/cancel", formRoute, u.guard(u.cancel))
	handle("POST /ui/jobs/{id}/retry", formRoute, u.guard(u.retry))
	page("GET /ui/tasks/{id}", u.task)
	page("GET /ui/tasks/{id}/log", u.taskLog)
	page("GET /ui/workers", u.workers)
	page("GET /ui/usage", u.usage)
	page("GET /ui/shards", u.shards)
	page("GET /ui/trees/{id}", u.tree)
	handle("GET /ui/accounts", pageRoute, adminOnly(u.guard(u.accounts)))
	handle("POST /ui/accounts", formRoute, adminOnly(u.guard(u.addAccount)))
	handle("POST /ui/accounts/{name}", formRoute, adminOnly(u.guard(u.setAccount)))
	handle("POST /ui/accounts/{name}/disable", formRoute, adminOnly(u.guard(u.disableAccount)))
	handle("POST /ui/accounts/{name}/enable", formRoute, adminOnly(u.guard(u.enableAccount)))
	handle("POST /ui/accounts/{name}/tokens", formRoute, adminOnly(u.guard(u.issueToken)))
	return u, nil
}

// Routes lists the patterns of the dashboard's routes, in the order they
// were registered, so that tests can check each of them.
func (u *UI) Routes() []string { return slices.Clone(u.patterns) }

// ServeHTTP serves a dashboard request.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the section the page belongs to
	Shard  string
	CSRF   string
	Open   bool // no login needed
	Admin  bool // the caller is an admin: the accounts page, owners
	Error  string
	Data   any
	Origin string
}

// render writes a page; status 0 is 200.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	p := page{Title: title, Nav: nav, Shard: u.e.Shard(), CSRF: u.sessions.FormToken(auth.SessionOf(r.Context())), Open: u.sessions.Open(), Data: data}
	// Only a page the gate admitted has a caller (the login page has
	// none, which domain.CallerOf would take for the admin).
	p.Admin = (p.Open || auth.SessionOf(r.Context()) != "") && domain.CallerOf(r.Context()).Admin
	t := u.pages[name]
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		u.log.ErrorContext(r.Context(), "render dashboard page", "page", name, "error", err)
		http.Error(w, "internal error; the server logged the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if status != 0 {
		w.WriteHeader(status)
	}
	_, _ = w.Write([]byte(b.String()))
}

// fail shows an error page for err: what went wrong and what to do.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := u.explain(r, err)
	u.render(w, r, status, "error", "Error", "", msg)
}

// explain turns err into a status and a message for people, logging the
// errors whose details are the server's business.
func (u *UI) explain(r *http.Request, err error) (int, string) {
	var tooBig *http.MaxBytesError
	var slow *auth.SlowBodyError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("The file is over this coordinator's limit of %s; split it, or ask the operator to raise SCIMESH_MAX_UPLOAD_BYTES.", domain.SizeText(tooBig.Limit))
	case errors.As(err, &slow):
		return http.StatusBadRequest, slow.Error()
	case errors.Is(err, domain.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, domain.ErrInvalidArgument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, domain.ErrNotReady), errors.Is(err, domain.ErrConflict), errors.Is(err, domain.ErrCancelled):
		return http.StatusConflict, err.Error()
	case errors.Is(err, domain.ErrPermissionDenied):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, domain.ErrQuotaExceeded):
		return http.StatusTooManyRequests, err.Error()
	case errors.Is(err, domain.ErrBusy):
		return http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, domain.ErrUnavailable):
		return http.StatusServiceUnavailable, "The database is not answering; try again in a moment."
	}
	u.log.ErrorContext(r.Context(), "dashboard error", "path", r.URL.Path, "error", err)
	return http.StatusInternalServerError, "Something went wrong on the server; it logged the details. Try again."
}

func (u *UI) parse() error {
	funcs := template.FuncMap{
		"age":       age,
		"pct":       func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"stamp":     stamp,
		"peerTask":  u.peerTaskURL,
		"path":      url.PathEscape,
		"local":     func(id string) bool { return domain.ShardOf(id) == u.e.Shard() },
		"size":      domain.SizeText,
		"sizeField": sizeField,
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return err
	}
	u.pages = map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("ui: parse %s: %w", n, err)
		}
		u.pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return nil
}

// peerTaskURL links to a task on another shard's dashboard, or nothing
// when that shard's URL is unknown.
func (u *UI) peerTaskURL(id string) string {
	base, ok := u.cfg.Topology.URL(domain.ShardOf(id))
	if !ok {
		return ""
	}
	return base + "/ui/tasks/" + url.PathEscape(id)
}

// age says how long ago (or in how long) t is, roughly, for people.
func age(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + spanText(-d)
	}
	return spanText(d) + " ago"
}

// spanText says how long d is, roughly, for people.
func spanText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}
