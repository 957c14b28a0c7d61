package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// docsOpenAPI is the copy of the served document kept for readers.
const docsOpenAPI = "../../docs/openapi.yaml"

// loadOpenAPI loads and validates an OpenAPI 3 document.
func loadOpenAPI(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

// GET /openapi.yaml serves, to anyone, the very bytes of docs/openapi.yaml.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	for _, token := range []string{"", tokens.Client, tokens.Worker} {
		r := b.mustStatus(b.do("GET", "/openapi.yaml", token, nil), http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != "application/yaml" {
			t.Errorf("Content-Type %q, want application/yaml", ct)
		}
		want, err := os.ReadFile(docsOpenAPI)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.body, want) {
			t.Fatalf("GET /openapi.yaml differs from docs/openapi.yaml; the source is internal/httpapi/openapi.yaml: " +
				"cp internal/httpapi/openapi.yaml docs/openapi.yaml")
		}
	}
	doc := loadOpenAPI(t, b.do("GET", "/openapi.yaml", "", nil).body)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %q, want 3.x", doc.OpenAPI)
	}
}

// docOperation is one operation of the document.
type docOperation struct {
	method, path string
	op           *openapi3.Operation
}

func operations(doc *openapi3.T) []docOperation {
	var out []docOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, docOperation{method, path, op})
		}
	}
	slices.SortFunc(out, func(a, b docOperation) int { return strings.Compare(a.path+" "+a.method, b.path+" "+b.method) })
	return out
}

// role is the token an operation's security asks for: "client", "worker",
// or "" for anyone.
func role(t *testing.T, doc *openapi3.T, o docOperation) string {
	t.Helper()
	sec := o.op.Security
	if sec == nil {
		sec = &doc.Security
	}
	switch {
	case len(*sec) == 0:
		return ""
	case len(*sec) == 1 && len((*sec)[0]) == 1:
		for scheme := range (*sec)[0] {
			switch scheme {
			case "clientToken":
				return "client"
			case "workerToken":
				return "worker"
			}
		}
	}
	t.Errorf("%s %s: security %v is not one of [], [clientToken], [workerToken]", o.method, o.path, *sec)
	return "?"
}

var pathParam = regexp.MustCompile(`\{[^/{}]+\}`)

// examplePath fills o's path parameters with their examples, and those
// without one with an ID-like value.
func examplePath(o docOperation) string {
	return pathParam.ReplaceAllStringFunc(o.path, func(m string) string {
		name := strings.Trim(m, "{}")
		for _, p := range o.op.Parameters {
			if p.Value != nil && p.Value.In == "path" && p.Value.Name == name && p.Value.Example != nil {
				return fmt.Sprint(p.Value.Example)
			}
		}
		return "s0:x"
	})
}

// Every operation takes the token its security names, and only that one:
// no token is 401, the other role's token 403, and an operation open to
// anyone answers without one.
func TestOpenAPIRoles(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	doc := loadOpenAPI(t, mustRead(t, docsOpenAPI))
	for _, o := range operations(doc) {
		path := examplePath(o)
		switch role(t, doc, o) {
		case "":
			if r := b.do(o.method, path, "", nil); r.status == 401 || r.status == 403 || r.status == 404 {
				t.Errorf("%s %s is documented as open to anyone, but without a token it is %v", o.method, o.path, r)
			}
		case "client":
			if r := b.do(o.method, path, "", nil); r.status != 401 {
				t.Errorf("%s %s without a token: %v, want 401", o.method, o.path, r)
			}
			if r := b.do(o.method, path, tokens.Worker, nil); r.status != 403 {
				t.Errorf("%s %s is documented for the client token, but with the worker token it is %v, want 403", o.method, o.path, r)
			}
		case "worker":
			if r := b.do(o.method, path, "", nil); r.status != 401 {
				t.Errorf("%s %s without a token: %v, want 401", o.method, o.path, r)
			}
			if r := b.do(o.method, path, tokens.Client, nil); r.status != 403 {
				t.Errorf("%s %s is documented for the worker token, but with the client token it is %v, want 403", o.method, o.path, r)
			}
		}
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// conformance sends requests to a real server and checks each request and
// each answer against the document: status, headers, media type and
// body schema. Response objects are checked strictly: a field the document
// does not name fails the test.
type conformance struct {
	t    *testing.T
	b    *bundle
	doc  *openapi3.T
	seen map[string]bool // "METHOD /path" of the operations exercised
}

// call is one request, addressed by the document's path and parameters.
type call struct {
	token   string
	method  string
	path    string            // the document's path, e.g. /jobs/{job_id}
	params  map[string]string // its path parameters
	query   string            // without "?"
	body    any               // string or []byte as is, else JSON; nil for none
	header  map[string]string
	status  int  // the status the server must answer
	invalid bool // the document must reject the request too
}

func (c *conformance) do(k call) response {
	c.t.Helper()
	item := c.doc.Paths.Value(k.path)
	if item == nil || item.GetOperation(k.method) == nil {
		c.t.Fatalf("the document has no %s %s", k.method, k.path)
	}
	c.seen[k.method+" "+k.path] = true
	target := k.path
	for name, v := range k.params {
		target = strings.ReplaceAll(target, "{"+name+"}", v)
	}
	if k.query != "" {
		target += "?" + k.query
	}
	var data []byte
	contentType := "application/json"
	switch v := k.body.(type) {
	case nil:
	case string:
		data, contentType = []byte(v), "text/csv"
	case []byte:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	headers := []string{}
	if k.body != nil {
		headers = append(headers, "Content-Type", contentType)
	}
	for name, v := range k.header {
		headers = append(headers, name, v)
	}

	req := httptest.NewRequest(k.method, target, bytes.NewReader(data))
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: k.params,
		Route:   &routers.Route{Spec: c.doc, Path: k.path, PathItem: item, Method: k.method, Operation: item.GetOperation(k.method)},
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SchemaValidationOptions: brief},
	}
	reqErr := openapi3filter.ValidateRequest(c.t.Context(), in)

	r := c.b.do(k.method, target, k.token, data, headers...)
	if r.status != k.status {
		c.t.Fatalf("%s %s: %v, want %d", k.method, target, r, k.status)
	}
	switch {
	case k.invalid && reqErr == nil:
		c.t.Errorf("%s %s: the server refuses %s, but the document allows it", k.method, k.path, data)
	case !k.invalid && reqErr != nil && r.status < 300:
		c.t.Errorf("%s %s: the document refuses a request the server takes (%d): %v", k.method, k.path, r.status, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: r.status, Header: r.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, SchemaValidationOptions: brief},
	}
	out.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(c.t.Context(), out); err != nil {
		c.t.Errorf("%s %s: the document does not describe the answer: %v\nthe answer: %v", k.method, target, err, r)
	}
	return r
}

// brief leaves schemas out of validation errors, which name the field.
var brief = []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()}

// strict makes every object schema of doc without additionalProperties
// refuse fields it does not name, so that responses carrying undocumented
// fields fail.
func strict(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		for _, l := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
			for _, x := range l {
				walk(x)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
}

// The server's answers over a job's life are what the document says, the
// document takes the requests the server takes and refuses some it
// refuses, and every documented operation is exercised.
// The dashboard's pages are text, like text/plain, for the validator.
func init() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) }

func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	doc := loadOpenAPI(t, mustRead(t, docsOpenAPI))
	strict(doc)
	c := &conformance{t: t, b: b, doc: doc, seen: map[string]bool{}}
	cl, wk := tokens.Client, tokens.Worker
	id := func(name, v string) map[string]string { return map[string]string{name: v} }

	c.do(call{method: "GET", path: "/health", status: 200})
	c.do(call{method: "GET", path: "/ready", status: 200})
	c.do(call{method: "GET", path: "/openapi.yaml", status: 200})

	// Upload and create.
	var up struct {
		UploadID string `json:"upload_id"`
	}
	c.do(call{token: cl, method: "POST", path: "/upload", body: "id,fp\na,ff\nb,0f\nc,f0\n", status: 201}).decode(t, &up)
	c.do(call{token: cl, method: "POST", path: "/upload", body: "id,fp\na,ff,x\n", status: 400})
	c.do(call{token: "", method: "POST", path: "/upload", body: "id\n", status: 401})
	c.do(call{token: wk, method: "POST", path: "/upload", body: "id\n", status: 403})
	create := map[string]any{
		"name": "conformance", "workload": "tanimoto", "parameters": map[string]any{"query": "ff"},
		"input": map[string]any{"upload_id": up.UploadID}, "chunk_rows": 1, "has_header": true, "top_k": 2,
		"score_column": "score", "order": "desc", "max_attempts": 2, "lease_seconds": 60, "priority": 5,
		"timeout_seconds": 600,
	}
	key := map[string]string{"Idempotency-Key": "conformance-1"}
	var j job
	c.do(call{token: cl, method: "POST", path: "/jobs", body: create, header: key, status: 201}).decode(t, &j)
	c.do(call{token: cl, method: "POST", path: "/jobs", body: create, header: key, status: 200})
	other := jobBody(2, nil)
	c.do(call{token: cl, method: "POST", path: "/jobs", body: other, header: key, status: 409})
	for _, bad := range []map[string]any{
		jobBody(1, map[string]any{"colour": "red"}),
		jobBody(1, map[string]any{"top_k": 0}),
		jobBody(1, map[string]any{"top_k": 100001}),
		jobBody(1, map[string]any{"chunk_rows": 0}),
		jobBody(1, map[string]any{"max_attempts": 101}),
		jobBody(1, map[string]any{"lease_seconds": 4}),
		jobBody(1, map[string]any{"priority": -1001}),
		jobBody(1, map[string]any{"timeout_seconds": -1}),
		jobBody(1, map[string]any{"timeout_seconds": 604801}),
		jobBody(1, map[string]any{"order": "up"}),
		jobBody(1, map[string]any{"input": map[string]any{"upload_id": up.UploadID, "chunks": chunks(1)}}),
		{"workload": "tanimoto"},
	} {
		c.do(call{token: cl, method: "POST", path: "/jobs", body: bad, status: 400, invalid: true})
	}
	c.do(call{token: cl, method: "POST", path: "/jobs", body: jobBody(0, map[string]any{"input": map[string]any{"upload_id": "s0:none"}}), status: 404})
	var doomed job
	c.do(call{token: cl, method: "POST", path: "/jobs", body: jobBody(2, map[string]any{"priority": -5}), status: 201}).decode(t, &doomed)

	// Read.
	c.do(call{token: cl, method: "GET", path: "/jobs", query: "status=pending&limit=1", status: 200})
	var page struct {
		NextCursor *string `json:"next_cursor"`
	}
	c.do(call{token: cl, method: "GET", path: "/jobs", query: "limit=1", status: 200}).decode(t, &page)
	if page.NextCursor == nil {
		t.Fatal("a page of 1 of 2 jobs has no next_cursor")
	}
	c.do(call{token: cl, method: "GET", path: "/jobs", query: "limit=1&cursor=" + *page.NextCursor, status: 200})
	c.do(call{token: cl, method: "GET", path: "/jobs", query: "status=sleeping", status: 400, invalid: true})
	c.do(call{token: cl, method: "GET", path: "/jobs", query: "limit=1001", status: 400, invalid: true})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}", params: id("job_id", j.JobID), status: 200})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}", params: id("job_id", "s0:none"), status: 404})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}/tasks", params: id("job_id", j.JobID), query: "state=pending&limit=2", status: 200})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}/tasks", params: id("job_id", j.JobID), query: "state=bored", status: 400, invalid: true})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}/result", params: id("job_id", j.JobID), status: 409})

	// Work: claim one, then the rest in a batch.
	for _, bad := range []map[string]any{
		{"worker_id": "w", "wait_seconds": 61},
		{"worker_id": "w", "max_tasks": 1001},
		{"worker_id": "w w"},
		{"worker_id": "w", "lease": true},
	} {
		c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: bad, status: 400, invalid: true})
	}
	var tk task
	c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "w", "workloads": []string{"tanimoto"}, "wait_seconds": 0}, status: 200}).decode(t, &tk)
	if tk.JobID != j.JobID {
		t.Fatalf("claimed a task of %s, want the job of priority 5, %s", tk.JobID, j.JobID)
	}
	tid := id("task_id", tk.TaskID)
	c.do(call{token: wk, method: "GET", path: "/tasks/{task_id}/input", params: tid, status: 200})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/heartbeat", params: tid, body: map[string]any{"worker_id": "w", "attempt": 1}, status: 200})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/heartbeat", params: tid, body: map[string]any{"worker_id": "other", "attempt": 1}, status: 409})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/logs", params: tid, body: map[string]any{"worker_id": "w", "attempt": 1, "lines": []string{"scoring", "done"}}, status: 204})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/failure", params: tid, body: map[string]any{"worker_id": "w", "attempt": 1, "error": "flaky", "retryable": true, "release": true}, status: 200})
	c.do(call{token: cl, method: "GET", path: "/tasks/{task_id}", params: tid, status: 200})
	c.do(call{token: cl, method: "GET", path: "/tasks/{task_id}", params: id("task_id", "s0:none"), status: 404})

	var batch struct{ Tasks []task }
	c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "w", "workloads": []string{"tanimoto"}, "max_tasks": 3}, status: 200}).decode(t, &batch)
	if len(batch.Tasks) != 3 {
		t.Fatalf("batch claim got %d tasks, want 3", len(batch.Tasks))
	}
	first := id("task_id", batch.Tasks[0].TaskID)
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/result", params: first, body: map[string]any{"worker_id": "w", "attempt": batch.Tasks[0].Attempt, "output": "id,score\nx,1\ny,2\nz,3\n"}, status: 400})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/result", params: first, body: map[string]any{"worker_id": "w", "attempt": batch.Tasks[0].Attempt}, status: 400, invalid: true})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/result", params: first,
		body: map[string]any{"worker_id": "w", "attempt": batch.Tasks[0].Attempt, "output": "id,score\na,1\n", "metrics": map[string]any{"rows": 1}}, status: 200})
	var items []map[string]any
	for _, x := range batch.Tasks[1:] {
		items = append(items, map[string]any{"task_id": x.TaskID, "worker_id": "w", "attempt": x.Attempt, "output": "id,score\n" + x.TaskID + ",0.5\n"})
	}
	items = append(items, map[string]any{"task_id": "s0:none", "worker_id": "w", "attempt": 1, "output": "id,score\n"})
	c.do(call{token: wk, method: "POST", path: "/tasks/results", body: map[string]any{"results": items}, status: 200})
	c.do(call{token: wk, method: "POST", path: "/tasks/results", body: map[string]any{"results": []any{}}, status: 400, invalid: true})
	b.waitJob(j.JobID, "completed")
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}", params: id("job_id", j.JobID), status: 200})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}/tasks", params: id("job_id", j.JobID), status: 200})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}/result", params: id("job_id", j.JobID), status: 200})
	c.do(call{token: cl, method: "GET", path: "/tasks/{task_id}/logs", params: tid, status: 200})
	c.do(call{token: cl, method: "GET", path: "/tasks/{task_id}/logs", params: tid, query: "follow=1", status: 200})
	c.do(call{token: cl, method: "GET", path: "/tasks/{task_id}/logs", params: tid, query: "follow=yes", status: 400, invalid: true})
	c.do(call{token: wk, method: "GET", path: "/tasks/{task_id}/logs", params: tid, status: 403})

	// The other job: its hosted chunk has no input here, it is cancelled
	// (twice), and its worker learns so.
	var dt task
	c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "w2"}, status: 200}).decode(t, &dt)
	c.do(call{token: wk, method: "GET", path: "/tasks/{task_id}/input", params: id("task_id", dt.TaskID), status: 404})
	c.do(call{token: cl, method: "POST", path: "/jobs/{job_id}/cancel", params: id("job_id", doomed.JobID), status: 200})
	c.do(call{token: cl, method: "POST", path: "/jobs/{job_id}/cancel", params: id("job_id", doomed.JobID), status: 200})
	c.do(call{token: wk, method: "POST", path: "/tasks/{task_id}/failure", params: id("task_id", dt.TaskID), body: map[string]any{"worker_id": "w2", "attempt": 1, "error": "x", "retryable": false}, status: 409})
	c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "w"}, status: 204})
	c.do(call{token: cl, method: "GET", path: "/jobs/{job_id}", params: id("job_id", doomed.JobID), status: 200})
	// Retried, it runs again; a job that is not failed or cancelled is 409.
	c.do(call{token: cl, method: "POST", path: "/jobs/{job_id}/retry", params: id("job_id", doomed.JobID), status: 200})
	c.do(call{token: cl, method: "POST", path: "/jobs/{job_id}/retry", params: id("job_id", doomed.JobID), status: 409})
	c.do(call{token: cl, method: "POST", path: "/jobs/{job_id}/retry", params: id("job_id", j.JobID), status: 409})

	// Accounts: an admin manages them, an account reads its own, and its
	// quotas refuse what would pass them.
	var alice struct {
		Token string `json:"token"`
	}
	c.do(call{token: cl, method: "POST", path: "/accounts", body: map[string]any{"name": "alice", "weight": 2, "max_jobs": 1, "max_storage": 10}, status: 201}).decode(t, &alice)
	c.do(call{token: cl, method: "POST", path: "/accounts", body: map[string]any{"name": "alice"}, status: 409})
	for _, bad := range []map[string]any{{"name": "Alice"}, {"name": "bob", "weight": 0}, {"name": "bob", "max_jobs": -1}, {"name": "bob", "colour": "red"}, {}} {
		c.do(call{token: cl, method: "POST", path: "/accounts", body: bad, status: 400, invalid: true})
	}
	c.do(call{token: alice.Token, method: "POST", path: "/accounts", body: map[string]any{"name": "mallory"}, status: 403})
	c.do(call{token: cl, method: "GET", path: "/accounts", status: 200})
	c.do(call{token: alice.Token, method: "GET", path: "/accounts", status: 403})
	name := func(n string) map[string]string { return id("name", n) }
	c.do(call{token: cl, method: "GET", path: "/accounts/{name}", params: name("alice"), status: 200})
	c.do(call{token: cl, method: "GET", path: "/accounts/{name}", params: name("nobody"), status: 404})
	c.do(call{token: cl, method: "PATCH", path: "/accounts/{name}", params: name("alice"), body: map[string]any{"weight": 3, "disabled": false}, status: 200})
	c.do(call{token: cl, method: "PATCH", path: "/accounts/{name}", params: name("alice"), body: map[string]any{"weight": 0}, status: 400, invalid: true})
	c.do(call{token: cl, method: "PATCH", path: "/accounts/{name}", params: name("admin"), body: map[string]any{"disabled": true}, status: 409})
	c.do(call{token: cl, method: "PATCH", path: "/accounts/{name}", params: name("nobody"), body: map[string]any{"weight": 1}, status: 404})
	c.do(call{token: alice.Token, method: "PATCH", path: "/accounts/{name}", params: name("alice"), body: map[string]any{"max_jobs": 0}, status: 403})
	c.do(call{token: cl, method: "POST", path: "/accounts/{name}/tokens", params: name("alice"), status: 201})
	c.do(call{token: cl, method: "POST", path: "/accounts/{name}/tokens", params: name("alice"), body: map[string]any{"revoke_others": true}, status: 201}).decode(t, &alice)
	c.do(call{token: cl, method: "POST", path: "/accounts/{name}/tokens", params: name("alice"), body: map[string]any{"revoke": true}, status: 400, invalid: true})
	c.do(call{token: cl, method: "POST", path: "/accounts/{name}/tokens", params: name("nobody"), status: 404})
	c.do(call{token: alice.Token, method: "GET", path: "/account", status: 200})
	c.do(call{token: cl, method: "GET", path: "/account", status: 200})
	c.do(call{token: alice.Token, method: "POST", path: "/jobs", body: jobBody(1, nil), status: 201})
	c.do(call{token: alice.Token, method: "POST", path: "/jobs", body: jobBody(1, nil), status: 429})
	c.do(call{token: alice.Token, method: "POST", path: "/upload", body: "id,fp\na,ff\n", status: 429})
	// Accounting: the attempts above, summed; the audit trail of what
	// was done, for an admin (the client token is the admin's).
	c.do(call{token: cl, method: "GET", path: "/usage", status: 200})
	c.do(call{token: cl, method: "GET", path: "/usage", query: "since=2020-01-01&until=2999-01-01T00:00:00Z&by=account,workload,day,worker_account", status: 200})
	c.do(call{token: cl, method: "GET", path: "/usage", query: "by=owner", status: 400})
	c.do(call{token: wk, method: "GET", path: "/usage", status: 403})
	c.do(call{token: cl, method: "GET", path: "/audit", query: "limit=2", status: 200})
	c.do(call{token: cl, method: "GET", path: "/audit", query: "limit=0", status: 400, invalid: true})
	c.do(call{token: cl, method: "GET", path: "/audit", query: "since=yesterday", status: 400})
	c.do(call{token: wk, method: "GET", path: "/audit", status: 403})
	c.do(call{token: alice.Token, method: "GET", path: "/usage", query: "by=account,day", status: 200})
	c.do(call{token: alice.Token, method: "GET", path: "/audit", status: 403})
	c.do(call{token: wk, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "announcer", "workloads": []string{"dock"}}, status: 204})
	c.do(call{token: cl, method: "GET", path: "/workloads", status: 200})
	c.do(call{token: alice.Token, method: "GET", path: "/workloads", status: 200})
	c.do(call{token: wk, method: "GET", path: "/workloads", status: 403})
	var laptop struct {
		Key string `json:"key"`
	}
	keyName := func(account, key string) map[string]string { return map[string]string{"account": account, "name": key} }
	c.do(call{token: alice.Token, method: "POST", path: "/worker-keys", body: map[string]any{"name": "laptop"}, status: 201}).decode(t, &laptop)
	c.do(call{token: alice.Token, method: "POST", path: "/worker-keys", body: map[string]any{"name": "laptop"}, status: 409})
	c.do(call{token: alice.Token, method: "POST", path: "/worker-keys", body: map[string]any{"name": "Lap/top"}, status: 400, invalid: true})
	c.do(call{token: wk, method: "POST", path: "/worker-keys", body: map[string]any{"name": "x"}, status: 403})
	c.do(call{token: alice.Token, method: "GET", path: "/worker-keys", status: 200})
	c.do(call{token: laptop.Key, method: "GET", path: "/worker-keys", status: 403})
	c.do(call{token: laptop.Key, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "laptop-1"}, status: 204})
	c.do(call{token: cl, method: "GET", path: "/workers", status: 200})
	c.do(call{token: alice.Token, method: "GET", path: "/workers", query: "limit=1", status: 200})
	c.do(call{token: cl, method: "GET", path: "/workers", query: "limit=0", status: 400, invalid: true})
	c.do(call{token: cl, method: "GET", path: "/workers", query: "cursor=nope!", status: 400})
	c.do(call{token: laptop.Key, method: "GET", path: "/workers", status: 403})
	c.do(call{token: alice.Token, method: "PATCH", path: "/worker-keys/{account}/{name}", params: keyName("alice", "laptop"), body: map[string]any{"trusted": true}, status: 403})
	c.do(call{token: alice.Token, method: "PATCH", path: "/worker-keys/{account}/{name}", params: keyName("admin", "laptop"), body: map[string]any{"trusted": true}, status: 404})
	c.do(call{token: cl, method: "PATCH", path: "/worker-keys/{account}/{name}", params: keyName("alice", "laptop"), body: map[string]any{"trusted": true}, status: 200})
	c.do(call{token: cl, method: "PATCH", path: "/worker-keys/{account}/{name}", params: keyName("alice", "laptop"), body: map[string]any{}, status: 400, invalid: true})
	c.do(call{token: cl, method: "PATCH", path: "/worker-keys/{account}/{name}", params: keyName("alice", "nope"), body: map[string]any{"trusted": true}, status: 404})
	c.do(call{token: cl, method: "DELETE", path: "/worker-keys/{name}", params: name("laptop"), status: 404})
	c.do(call{token: alice.Token, method: "DELETE", path: "/worker-keys/{name}", params: name("laptop"), status: 200})
	c.do(call{token: laptop.Key, method: "POST", path: "/tasks/claim", body: map[string]any{"worker_id": "laptop-1"}, status: 401})

	// The parts other packages serve, open to anyone: the dashboard sends
	// a browser without a session on to its login page.
	c.do(call{method: "GET", path: "/metrics", status: 200})
	c.do(call{method: "GET", path: "/ui/{page}", params: id("page", "login"), status: 200})

	for _, o := range operations(doc) {
		if !c.seen[o.method+" "+o.path] {
			t.Errorf("%s %s is documented but not exercised here: add a call", o.method, o.path)
		}
	}
	if t.Failed() {
		t.Log("the source of the document is internal/httpapi/openapi.yaml; docs/openapi.yaml is its copy")
	}
}
