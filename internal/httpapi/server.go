package httpapi

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"

	"github.com/scimesh/scimesh/internal/engine"
)

// Tokens are the bearer tokens of each role. An empty token leaves its
// role's endpoints open, which the server only allows on loopback.
type Tokens struct {
	Worker string
	Client string
}

// Server serves the REST API over an engine.
type Server struct {
	// MaxUploadBytes bounds the body of POST /upload; over it the answer is
	// 413. New sets it to DefaultMaxUploadBytes; change it before serving.
	MaxUploadBytes int64
	// Metrics serves GET /metrics and UI the dashboard under /ui/: parts of
	// the HTTP API that other packages build. Set them before serving; a
	// nil one answers 404.
	Metrics, UI http.Handler

	engine *engine.Engine
	tokens Tokens
	log    *slog.Logger
	mux    *http.ServeMux
	// patterns are the route patterns routes registered, in order (see routeMux).
	patterns []string
}

// New returns the REST API of e.
func New(e *engine.Engine, tokens Tokens, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{MaxUploadBytes: DefaultMaxUploadBytes, engine: e, tokens: tokens, log: log, mux: http.NewServeMux()}
	s.routes()
	return s
}

// part serves what get returns, or 404 when it returns nil.
func (s *Server) part(get func() http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := get(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		writeAPIError(w, http.StatusNotFound, "not_found", r.URL.Path+" is not served by this process")
	})
}

func (s *Server) routes() {
	client := func(h http.HandlerFunc) http.Handler { return s.auth(roleClient, h) }
	worker := func(h http.HandlerFunc) http.Handler { return s.auth(roleWorker, h) }
	m := routeMux{s} // register every route through m, so that it is listed
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /ready", s.ready)
	m.HandleFunc("GET /openapi.yaml", s.openAPI)
	m.Handle("GET /metrics", s.part(func() http.Handler { return s.Metrics }))
	m.Handle("/ui/", s.part(func() http.Handler { return s.UI }))

	m.Handle("POST /upload", client(s.upload))
	m.Handle("POST /jobs", client(s.createJob))
	m.Handle("GET /jobs", client(s.listJobs))
	m.Handle("GET /jobs/{job_id}", client(s.getJob))
	m.Handle("GET /jobs/{job_id}/tasks", client(s.listTasks))
	m.Handle("GET /jobs/{job_id}/result", client(s.jobResult))
	m.Handle("POST /jobs/{job_id}/cancel", client(s.cancelJob))
	m.Handle("GET /tasks/{task_id}", client(s.getTask))
	m.Handle("GET /tasks/{task_id}/logs", client(s.logs))

	m.Handle("POST /tasks/claim", worker(s.claim))
	m.Handle("POST /tasks/results", worker(s.batchResults))
	m.Handle("POST /tasks/{task_id}/heartbeat", worker(s.heartbeat))
	m.Handle("POST /tasks/{task_id}/result", worker(s.result))
	m.Handle("POST /tasks/{task_id}/failure", worker(s.failure))
	m.Handle("GET /tasks/{task_id}/input", worker(s.taskInput))
	m.Handle("POST /tasks/{task_id}/logs", worker(s.appendLogs))

	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { // the fallback: not a route
		writeAPIError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path+"; see GET /openapi.yaml or the API reference in the README")
	})
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.ContainsRune(r.URL.Path, 0) {
		writeAPIError(w, http.StatusNotFound, "not_found", "no such path: it holds a NUL character")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.engine.Ping(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

type role int

const (
	roleClient role = iota
	roleWorker
)

func (r role) String() string {
	if r == roleWorker {
		return "worker"
	}
	return "client"
}

// auth admits requests bearing the token of role. An unknown token is 401;
// a known token of another role is 403.
func (s *Server) auth(want role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := s.tokens.Client
		if want == roleWorker {
			need = s.tokens.Worker
		}
		if need == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := r.Header.Get("Authorization")
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="scimesh"`)
			writeAPIError(w, http.StatusUnauthorized, codeUnauthenticated,
				"missing bearer token: send the "+want.String()+" token as 'Authorization: Bearer TOKEN'")
			return
		}
		switch {
		case equal(token, need):
			next.ServeHTTP(w, r)
		case equal(token, s.tokens.Client) || equal(token, s.tokens.Worker):
			writeAPIError(w, http.StatusForbidden, codePermissionDenied,
				"this token may not call "+r.Method+" "+r.URL.Path+"; it needs the "+want.String()+" token")
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="scimesh", error="invalid_token"`)
			writeAPIError(w, http.StatusUnauthorized, codeUnauthenticated, "unknown token: check the token you were given")
		}
	})
}

func equal(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
