package httpapi

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/scimesh/scimesh/internal/auth"
)

// TestOpenAPIMatchesRouter checks, both ways, that the operations of the
// embedded OpenAPI document are the routes the router serves: every route
// registered in routes (as recorded by routeMux) is documented under the
// same method and path, and every documented operation reaches, through
// the real mux, the route registered under that very pattern.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := loadEmbeddedOpenAPI(t)
	s := New(nil, auth.NewGate(auth.Tokens{}), nil, 0)
	if len(s.patterns) == 0 {
		t.Fatal("the router recorded no routes; are they registered through routeMux?")
	}
	registered := map[string]bool{}
	for _, p := range s.patterns {
		registered[p] = true
	}

	// Router → document.
	for _, p := range s.patterns {
		method, path, err := openAPIRoute(p)
		if err != nil {
			t.Error(err)
			continue
		}
		item := doc.Paths.Value(path)
		switch {
		case item == nil:
			t.Errorf("the router serves %q, but the document has no path %s: add it to internal/httpapi/openapi.yaml", p, path)
		case method == "" && len(item.Operations()) == 0:
			t.Errorf("the router serves %q (any method), but the document has no operation on %s", p, path)
		case method != "" && item.GetOperation(method) == nil:
			t.Errorf("the router serves %q, but the document has no %s operation on %s: add it to internal/httpapi/openapi.yaml", p, strings.ToLower(method), path)
		}
	}

	// Document → router.
	ops := 0
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops++
			req := httptest.NewRequest(method, samplePath(path), nil)
			_, pattern := s.mux.Handler(req)
			if !registered[pattern] {
				t.Errorf("the document has %s %s, but the router does not serve it (it falls to %q): remove it from the document or add the route", method, path, pattern)
				continue
			}
			m, p, err := openAPIRoute(pattern)
			if err != nil {
				t.Error(err)
				continue
			}
			if p != path || (m != method && m != "") {
				t.Errorf("the document has %s %s, but the router serves that request as %q: document the route under its pattern", method, path, pattern)
			}
		}
	}
	if ops == 0 {
		t.Error("the document has no operations")
	}
}

var (
	restWildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\.\.\.\}`)
	pathParam    = regexp.MustCompile(`\{[^/{}]+\}`)
)

// openAPIRoute turns a ServeMux pattern, "[METHOD ]/path", into the method
// and the OpenAPI path that document it: "{name...}" becomes "{name}" and
// "{$}" goes. A pattern without a method has method "".
func openAPIRoute(pattern string) (method, path string, err error) {
	f := strings.Fields(pattern)
	switch len(f) {
	case 1:
		path = f[0]
	case 2:
		method, path = f[0], f[1]
	default:
		return "", "", fmt.Errorf("route pattern %q is not [METHOD ]PATH", pattern)
	}
	if !strings.HasPrefix(path, "/") {
		return "", "", fmt.Errorf("route pattern %q names a host, which the document cannot say", pattern)
	}
	path = strings.TrimSuffix(path, "{$}")
	return method, restWildcard.ReplaceAllString(path, "{$1}"), nil
}

// samplePath fills an OpenAPI path's parameters with an ID-like value.
func samplePath(path string) string {
	return pathParam.ReplaceAllString(path, "s0:x")
}

func TestOpenAPIRoute(t *testing.T) {
	for _, c := range []struct{ pattern, method, path string }{
		{"GET /jobs/{job_id}", "GET", "/jobs/{job_id}"},
		{"POST /tasks/claim", "POST", "/tasks/claim"},
		{"GET /ui/{file...}", "GET", "/ui/{file}"},
		{"GET /{$}", "GET", "/"},
		{"/ui/{page...}", "", "/ui/{page}"},
	} {
		m, p, err := openAPIRoute(c.pattern)
		if err != nil || m != c.method || p != c.path {
			t.Errorf("openAPIRoute(%q) = %q, %q, %v; want %q, %q", c.pattern, m, p, err, c.method, c.path)
		}
	}
	if _, _, err := openAPIRoute("GET example.org/x"); err == nil {
		t.Error("a host pattern was taken")
	}
}

// loadEmbeddedOpenAPI loads and validates the document the server serves.
func loadEmbeddedOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDoc)
	if err != nil {
		t.Fatalf("load internal/httpapi/openapi.yaml: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("internal/httpapi/openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// The recorded patterns are the ones the mux serves, in registration order.
func TestRouteMuxRecords(t *testing.T) {
	s := New(nil, auth.NewGate(auth.Tokens{}), nil, 0)
	if !slices.Contains(s.patterns, "GET /openapi.yaml") || !slices.Contains(s.patterns, "POST /tasks/claim") {
		t.Fatalf("recorded patterns %q lack GET /openapi.yaml or POST /tasks/claim", s.patterns)
	}
	for _, p := range s.patterns {
		m, path, err := openAPIRoute(p)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(orElse(m, "GET"), samplePath(path), nil)
		if _, got := s.mux.Handler(req); got != p {
			t.Errorf("a request for recorded route %q reaches %q", p, got)
		}
	}
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
