package telemetry

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// RequestIDHeader is the header that carries a request's ID, both ways.
const RequestIDHeader = "X-Request-ID"

// Wrap returns next (normally the server's whole http.ServeMux) with
// request IDs, request metrics and request logs:
//
//   - Every request gets an ID: the one in its X-Request-ID header when that
//     is sane (1-128 characters of A-Z a-z 0-9 and - _ . : + / =), else a new
//     random one. The ID is sent back in X-Request-ID and carried in the
//     request's context (RequestID), so that a logger built on
//     NewLogHandler adds it to every record logged with that context.
//   - Its duration goes to scimesh_http_request_duration_seconds under the
//     pattern of the http.ServeMux route that served it (r.Pattern after
//     routing: for the REST API the route of its own mux, which routes the
//     same *http.Request; for the gRPC and Connect services their prefix),
//     never the raw path, which holds IDs.
//   - One line is logged to log when it ends: method, route, path, status,
//     bytes, duration and request ID, at Info, or at Debug for the health,
//     readiness and metrics probes.
func (m *Metrics) Wrap(next http.Handler, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(WithRequestID(r.Context(), id))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		d := time.Since(start)

		route := r.Pattern // set by the mux that routed r
		if route == "" {
			route = "unmatched"
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK // what net/http sends for a handler that wrote nothing
		}
		m.requests.WithLabelValues(methodLabel(r.Method), route, strconv.Itoa(code)).Observe(d.Seconds())

		level := slog.LevelInfo
		if probes[route] {
			level = slog.LevelDebug
		}
		log.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
			slog.Int("status", code), slog.Int64("bytes", rec.bytes),
			slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.String(RequestIDKey, id))
	})
}

// probes are the routes polled by monitoring, logged at Debug only.
var probes = map[string]bool{"GET /health": true, "GET /ready": true, "GET /metrics": true}

// methodLabel bounds the values of the method label: any other method a
// client sends is "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// validRequestID reports whether an incoming request ID is safe to take
// over: short, and made of characters that need no quoting anywhere.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '+', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 32 random hex digits.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

// recorder notes the status and size of a response. It keeps what the
// handlers behind it rely on: Flush for streams (gRPC, log follows),
// ReadFrom for sendfile, and Unwrap for http.ResponseController.
type recorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

// WriteHeader implements http.ResponseWriter.
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 { // 1xx are interim: the final status follows
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// ReadFrom implements io.ReaderFrom, so that io.Copy to the response can
// still use sendfile.
func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := r.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{r.ResponseWriter}, src)
	}
	r.bytes += n
	return n, err
}

// writerOnly hides every method of a writer but Write, so that io.Copy
// does not call ReadFrom back.
type writerOnly struct{ io.Writer }

// Flush implements http.Flusher; it does nothing when the underlying
// writer cannot flush.
func (r *recorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
