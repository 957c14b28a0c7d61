package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"

	"github.com/scimesh/scimesh/internal/auth"
)

// openAPIDoc is the OpenAPI 3 document of this API, served at
// GET /openapi.yaml. docs/openapi.yaml is a copy of the same bytes; a test
// keeps the two identical and the document true to the routes.
//
//go:embed openapi.yaml
var openAPIDoc []byte

// openAPIContentType is the media type GET /openapi.yaml answers with
// (RFC 9512).
const openAPIContentType = "application/yaml"

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", openAPIContentType)
	h.Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(openAPIDoc)
	}
}

// routeMux registers routes on the server's mux and keeps their patterns,
// so that the routes the server serves can be listed without a second,
// hand-written list (the OpenAPI test compares them with the document).
type routeMux struct{ s *Server }

// Handle registers h at pattern behind the server's gate, which admits
// the callers rt names.
func (m routeMux) Handle(pattern string, rt auth.Route, h http.Handler) {
	m.mount(pattern, m.s.gate.Guard(rt, Deny, h))
}

// mount registers a handler that puts its requests behind the gate itself
// (the dashboard, whose routes each have their own; the upload, whose
// bound is read per request).
func (m routeMux) mount(pattern string, h http.Handler) {
	m.s.mux.Handle(pattern, h)
	m.s.patterns = append(m.s.patterns, pattern)
}
