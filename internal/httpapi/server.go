package httpapi

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/engine"
)

// Server serves the REST API over an engine.
type Server struct {
	// Metrics serves GET /metrics and UI the dashboard under /ui/: parts of
	// the HTTP API that other packages build. Set them before serving; a
	// nil one answers 404.
	Metrics, UI http.Handler

	engine *engine.Engine
	gate   *auth.Gate
	// maxUpload bounds the body of POST /upload; over it the answer is 413.
	maxUpload int64
	log       *slog.Logger
	mux       *http.ServeMux
	// patterns are the route patterns routes registered, in order (see routeMux).
	patterns []string
}

// New returns the REST API of e, every route behind gate, taking uploads
// of up to maxUpload bytes (0: DefaultMaxUploadBytes).
func New(e *engine.Engine, gate *auth.Gate, log *slog.Logger, maxUpload int64) *Server {
	if log == nil {
		log = slog.Default()
	}
	if maxUpload <= 0 {
		maxUpload = DefaultMaxUploadBytes
	}
	s := &Server{maxUpload: maxUpload, engine: e, gate: gate, log: log, mux: http.NewServeMux()}
	if e != nil {
		gate.Bind(e) // accounts and sessions live in the database, shared by every replica
	}
	s.routes()
	return s
}

// MaxUpload is the most bytes one upload may hold: the dashboard takes
// uploads up to the same bound.
func (s *Server) MaxUpload() int64 { return s.maxUpload }

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

// Request body bounds, by route (SPEC §7).
const (
	smallBody = 1 << 20   // claims, heartbeats, failures, cancels, retries
	logBody   = 16 << 20  // log lines
	largeBody = 256 << 20 // job creation and results

	accountBody = 64 << 10 // an account's settings
)

func (s *Server) routes() {
	m := routeMux{s} // register every route through m, so that it is listed
	open := auth.Route{Role: auth.Anyone}
	m.Handle("GET /health", open, http.HandlerFunc(Health))
	m.Handle("GET /ready", open, http.HandlerFunc(s.ready))
	m.Handle("GET /openapi.yaml", open, http.HandlerFunc(s.openAPI))
	m.Handle("GET /metrics", open, s.part(func() http.Handler { return s.Metrics }))
	m.mount("/ui/{page...}", s.part(func() http.Handler { return s.UI })) // the dashboard guards its own routes

	client := func(body int64, json bool) auth.Route {
		return auth.Route{Role: auth.Client, MaxBody: body, JSON: json}
	}
	worker := func(body int64) auth.Route { return auth.Route{Role: auth.Worker, MaxBody: body, JSON: true} }
	m.mount("POST /upload", s.gate.Guard(auth.Route{Role: auth.Client, MaxBody: s.maxUpload}, s.denyUpload, http.HandlerFunc(s.upload)))
	m.Handle("POST /jobs", client(largeBody, true), http.HandlerFunc(s.createJob))
	m.Handle("GET /jobs", client(0, false), http.HandlerFunc(s.listJobs))
	m.Handle("GET /jobs/{job_id}", client(0, false), http.HandlerFunc(s.getJob))
	m.Handle("GET /jobs/{job_id}/tasks", client(0, false), http.HandlerFunc(s.listTasks))
	m.Handle("GET /jobs/{job_id}/result", client(0, false), http.HandlerFunc(s.jobResult))
	m.Handle("POST /jobs/{job_id}/cancel", client(smallBody, true), http.HandlerFunc(s.cancelJob))
	m.Handle("POST /jobs/{job_id}/retry", client(smallBody, true), http.HandlerFunc(s.retryJob))
	m.Handle("GET /tasks/{task_id}", client(0, false), http.HandlerFunc(s.getTask))
	m.Handle("GET /tasks/{task_id}/logs", client(0, false), http.HandlerFunc(s.logs))
	m.Handle("GET /account", client(0, false), http.HandlerFunc(s.ownAccount))
	m.Handle("POST /accounts", client(accountBody, true), http.HandlerFunc(s.createAccount))
	m.Handle("GET /accounts", client(0, false), http.HandlerFunc(s.listAccounts))
	m.Handle("GET /accounts/{name}", client(0, false), http.HandlerFunc(s.getAccount))
	m.Handle("PATCH /accounts/{name}", client(accountBody, true), http.HandlerFunc(s.updateAccount))
	m.Handle("POST /accounts/{name}/tokens", client(accountBody, true), http.HandlerFunc(s.issueToken))
	m.Handle("POST /worker-keys", client(accountBody, true), http.HandlerFunc(s.createWorkerKey))
	m.Handle("GET /worker-keys", client(0, false), http.HandlerFunc(s.listWorkerKeys))
	m.Handle("DELETE /worker-keys/{name}", client(0, false), http.HandlerFunc(s.revokeWorkerKey))
	m.Handle("PATCH /worker-keys/{account}/{name}", client(accountBody, true), http.HandlerFunc(s.trustWorkerKey))
	m.Handle("GET /usage", client(0, false), http.HandlerFunc(s.listUsage))
	m.Handle("GET /audit", client(0, false), http.HandlerFunc(s.listAudit))
	m.Handle("GET /workloads", client(0, false), http.HandlerFunc(s.listWorkloads))
	m.Handle("GET /workers", client(0, false), http.HandlerFunc(s.listWorkers))

	m.Handle("POST /tasks/claim", worker(smallBody), http.HandlerFunc(s.claim))
	m.Handle("POST /tasks/results", worker(largeBody), http.HandlerFunc(s.batchResults))
	m.Handle("POST /tasks/{task_id}/heartbeat", worker(smallBody), http.HandlerFunc(s.heartbeat))
	m.Handle("POST /tasks/{task_id}/result", worker(largeBody), http.HandlerFunc(s.result))
	m.Handle("POST /tasks/{task_id}/failure", worker(smallBody), http.HandlerFunc(s.failure))
	m.Handle("GET /tasks/{task_id}/input", auth.Route{Role: auth.Worker}, http.HandlerFunc(s.taskInput))
	m.Handle("POST /tasks/{task_id}/logs", worker(logBody), http.HandlerFunc(s.appendLogs))

	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { // the fallback: not a route
		writeAPIError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path+"; see GET /openapi.yaml or docs/api.md")
	})
}

// Deny writes a refusal of the gate as the API's error object; a 503
// refusal (a coordinator still waiting for its database) says when to
// try again, as every 503 of the API does.
func Deny(w http.ResponseWriter, r *http.Request, e *auth.Error) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="scimesh"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	writeAPIError(w, e.Status, e.Code, e.Message)
}

// Routes lists the patterns of the routes the server serves, in the order
// they were registered.
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.ContainsRune(r.URL.Path, 0) {
		writeAPIError(w, http.StatusNotFound, "not_found", "no such path: it holds a NUL character")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Health answers GET /health: the process is alive, whether or not its
// database answers.
func Health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.engine.Ping(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
