// Package ui is the dashboard under /ui/: server-rendered pages from
// templates embedded in the binary, a little plain JavaScript for the live
// parts (Server-Sent Events), nothing loaded from elsewhere and no build
// step. It reads and acts through the engine, like the REST API, and holds
// no rules of its own.
//
// With a client token configured, a person logs in once with it and gets a
// session cookie (HttpOnly, SameSite=Strict) signed with a key derived from
// the token, so every replica accepts it and changing the token ends every
// session. Requests that change something (cancel, log out) are POSTs that
// carry a token derived from the session and come from the dashboard's own
// origin; others are refused.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

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
	// ClientToken is the token people log in with; empty leaves the
	// dashboard open (the server then listens on loopback only).
	ClientToken string
	// Topology says where the other shards are, for the shards page and
	// links to their tasks; nil for a single shard.
	Topology *topology.Topology
	// Logger receives errors the pages could not show; default slog.Default().
	Logger *slog.Logger
}

// UI serves the dashboard.
type UI struct {
	e     *engine.Engine
	cfg   Config
	auth  *auth
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	http  *http.Client // for peers' reachability
}

// New returns the dashboard of e, to be mounted at /ui/.
func New(e *engine.Engine, cfg Config) (*UI, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Topology == nil {
		cfg.Topology = &topology.Topology{}
	}
	u := &UI{e: e, cfg: cfg, auth: newAuth(cfg.ClientToken), log: cfg.Logger, mux: http.NewServeMux(),
		http: &http.Client{Timeout: 2 * time.Second}}
	if err := u.parse(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	m := u.mux
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/login", u.loginPage)
	m.HandleFunc("POST /ui/login", u.login)
	m.HandleFunc("POST /ui/logout", u.guard(u.logout))
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/jobs", u.guard(u.jobs))
	m.HandleFunc("GET /ui/jobs/{id}", u.guard(u.job))
	m.HandleFunc("GET /ui/jobs/{id}/events", u.guard(u.jobEvents))
	m.HandleFunc("GET /ui/jobs/{id}/result", u.guard(u.result))
	m.HandleFunc("POST /ui/jobs/{id}/cancel", u.guard(u.cancel))
	m.HandleFunc("GET /ui/tasks/{id}", u.guard(u.task))
	m.HandleFunc("GET /ui/tasks/{id}/log", u.guard(u.taskLog))
	m.HandleFunc("GET /ui/workers", u.guard(u.workers))
	m.HandleFunc("GET /ui/shards", u.guard(u.shards))
	m.HandleFunc("GET /ui/trees/{id}", u.guard(u.tree))
	return u, nil
}

// ServeHTTP serves a dashboard request.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	u.mux.ServeHTTP(w, r)
}

// guard admits requests with a session (or the client token as a bearer
// token), and for POSTs only those from the dashboard's own pages.
func (u *UI) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		session, ok := u.auth.session(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/log") {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in at /ui/login first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if err := u.auth.checkPost(r, session); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, session)))
	}
}

type sessionKey struct{}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the section the page belongs to
	Shard  string
	CSRF   string
	Open   bool // no login needed
	Error  string
	Data   any
	Origin string
}

// render writes a page; status 0 is 200.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	session, _ := r.Context().Value(sessionKey{}).(string)
	p := page{Title: title, Nav: nav, Shard: u.e.Shard(), CSRF: u.auth.csrf(session), Open: u.auth.open(), Data: data}
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
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, domain.ErrInvalidArgument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, domain.ErrNotReady), errors.Is(err, domain.ErrConflict), errors.Is(err, domain.ErrCancelled):
		return http.StatusConflict, err.Error()
	case errors.Is(err, domain.ErrUnavailable):
		return http.StatusServiceUnavailable, "The database is not answering; try again in a moment."
	}
	u.log.ErrorContext(r.Context(), "dashboard error", "path", r.URL.Path, "error", err)
	return http.StatusInternalServerError, "Something went wrong on the server; it logged the details. Try again."
}

func (u *UI) parse() error {
	funcs := template.FuncMap{
		"age":      age,
		"pct":      func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
		"stamp":    stamp,
		"peerTask": u.peerTaskURL,
		"path":     url.PathEscape,
		"local":    func(id string) bool { return domain.ShardOf(id) == u.e.Shard() },
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
