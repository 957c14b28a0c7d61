package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/auth"
)

var tokens = auth.Tokens{Worker: "worker-secret", Client: "client-secret"}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens})
	j := b.createJob(1, nil)
	routes := []struct {
		method, path string
		worker       bool
	}{
		{"POST", "/jobs", false},
		{"GET", "/jobs", false},
		{"GET", "/jobs/" + j.JobID, false},
		{"GET", "/jobs/" + j.JobID + "/tasks", false},
		{"GET", "/jobs/" + j.JobID + "/result", false},
		{"POST", "/jobs/" + j.JobID + "/cancel", false},
		{"GET", "/tasks/" + j.JobID + "-0", false},
		{"POST", "/upload", false},
		{"GET", "/tasks/" + j.JobID + "-0/logs", false},
		{"GET", "/tasks/" + j.JobID + "-0/input", true},
		{"POST", "/tasks/" + j.JobID + "-0/logs", true},
		{"POST", "/tasks/claim", true},
		{"POST", "/tasks/results", true},
		{"POST", "/tasks/" + j.JobID + "-0/heartbeat", true},
		{"POST", "/tasks/" + j.JobID + "-0/result", true},
		{"POST", "/tasks/" + j.JobID + "-0/failure", true},
	}
	for _, rt := range routes {
		wrong := tokens.Worker
		if rt.worker {
			wrong = tokens.Client
		}
		for _, c := range []struct {
			token, code string
			status      int
		}{
			{"", "unauthenticated", 401},
			{"nope", "unauthenticated", 401},
			{wrong, "permission_denied", 403},
		} {
			r := b.do(rt.method, rt.path, c.token, "{}")
			if r.status != c.status || r.errCode() != c.code {
				t.Errorf("%s %s with token %q = %s, want %d %s", rt.method, rt.path, c.token, r, c.status, c.code)
			}
		}
	}
	if got := b.getJob(j.JobID); got.Status != "pending" {
		t.Fatalf("refused requests changed the job: %s", got.Status)
	}
	// The right token passes authentication (whatever the handler then says).
	for _, rt := range routes {
		right := tokens.Client
		if rt.worker {
			right = tokens.Worker
		}
		if r := b.do(rt.method, rt.path, right, "{}"); r.status == 401 || r.status == 403 {
			t.Errorf("%s %s with its own token = %s", rt.method, rt.path, r)
		}
	}
	// Health, readiness need no token.
	b.mustStatus(b.do("GET", "/health", "", nil), 200)
}

func TestOpenWithoutTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	// Without tokens, a page of another site still cannot drive the API
	// from a browser on this machine: what the browser marks as cross-site
	// is refused, before anything is read or changed.
	for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}} {
		r := b.do("POST", "/jobs", "", jobBody(1, nil), h...)
		if r.status != http.StatusForbidden || r.errCode() != "permission_denied" {
			t.Errorf("cross-site job creation (%s: %s) on an open server: %s, want 403 permission_denied", h[0], h[1], r)
		}
		if r := b.do("POST", "/tasks/claim", "", map[string]any{"worker_id": "w"}, h...); r.status != http.StatusForbidden {
			t.Errorf("cross-site claim (%s: %s) on an open server: %s, want 403", h[0], h[1], r)
		}
	}
	if r := b.client("GET", "/jobs", nil); !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Errorf("jobs after the refused cross-site requests: %s, want none", r)
	}
	// Its own origin, and callers that are not browsers, are served.
	b.mustStatus(b.do("POST", "/jobs", "", jobBody(1, nil), "Sec-Fetch-Site", "same-origin"), http.StatusCreated)
	b.mustStatus(b.do("POST", "/jobs", "", jobBody(1, nil)), http.StatusCreated)
	if _, ok := b.claim("w", nil); !ok {
		t.Fatal("no task claimed without tokens configured")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: tokens, noLoops: true})
	j := b.createJob(2, nil)
	tk, _ := b.claim("w", nil)
	taskPath := "/tasks/" + tk.TaskID
	huge := strings.Repeat("x", 300<<20)
	tests := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"job: empty body", "POST", "/jobs", "", 400, "invalid_argument"},
		{"job: malformed", "POST", "/jobs", "{", 400, "invalid_argument"},
		{"job: array", "POST", "/jobs", "[]", 400, "invalid_argument"},
		{"job: trailing data", "POST", "/jobs", `{"workload":"x","input":{"chunks":[]}} {}`, 400, "invalid_argument"},
		{"job: unknown field", "POST", "/jobs", jobBody(1, map[string]any{"colour": "red"}), 400, "invalid_argument"},
		{"job: unknown input field", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"url": "x"}}), 400, "invalid_argument"},
		{"job: workload missing", "POST", "/jobs", map[string]any{"input": map[string]any{"chunks": chunks(1)}}, 400, "invalid_argument"},
		{"job: input missing", "POST", "/jobs", map[string]any{"workload": "w"}, 400, "invalid_argument"},
		{"job: no chunks", "POST", "/jobs", jobBody(0, nil), 400, "invalid_argument"},
		{"job: both inputs", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"upload_id": "u", "chunks": chunks(1)}}), 400, "invalid_argument"},
		{"job: unknown upload", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"upload_id": "s0:none"}}), 404, "not_found"},
		{"job: top_k string", "POST", "/jobs", jobBody(1, map[string]any{"top_k": "10"}), 400, "invalid_argument"},
		{"job: top_k float", "POST", "/jobs", jobBody(1, map[string]any{"top_k": 1.5}), 400, "invalid_argument"},
		{"job: top_k 0", "POST", "/jobs", jobBody(1, map[string]any{"top_k": 0}), 400, "invalid_argument"},
		{"job: top_k over", "POST", "/jobs", jobBody(1, map[string]any{"top_k": 100001}), 400, "invalid_argument"},
		{"job: chunk_rows over", "POST", "/jobs", jobBody(1, map[string]any{"chunk_rows": 10000001}), 400, "invalid_argument"},
		{"job: max_attempts 0", "POST", "/jobs", jobBody(1, map[string]any{"max_attempts": 0}), 400, "invalid_argument"},
		{"job: lease_seconds 4", "POST", "/jobs", jobBody(1, map[string]any{"lease_seconds": 4}), 400, "invalid_argument"},
		{"job: priority 1001", "POST", "/jobs", jobBody(1, map[string]any{"priority": 1001}), 400, "invalid_argument"},
		{"job: order", "POST", "/jobs", jobBody(1, map[string]any{"order": "random"}), 400, "invalid_argument"},
		{"job: parameters array", "POST", "/jobs", jobBody(1, map[string]any{"parameters": []int{1}}), 400, "invalid_argument"},
		{"job: has_header string", "POST", "/jobs", jobBody(1, map[string]any{"has_header": "yes"}), 400, "invalid_argument"},
		{"job: bad sha256", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"chunks": []map[string]any{{"uri": "https://x.org/a", "sha256": "abc"}}}}), 400, "invalid_argument"},
		{"job: bad uri", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"chunks": []map[string]any{{"uri": "not a url", "sha256": strings.Repeat("0", 64)}}}}), 400, "invalid_argument"},
		{"job: name too long", "POST", "/jobs", jobBody(1, map[string]any{"name": strings.Repeat("n", 300)}), 400, "invalid_argument"},
		{"job: body too large", "POST", "/jobs", `{"name":"` + huge + `"}`, 413, "too_large"},
		{"jobs: bad status", "GET", "/jobs?status=done", nil, 400, "invalid_argument"},
		{"jobs: bad limit", "GET", "/jobs?limit=x", nil, 400, "invalid_argument"},
		{"jobs: limit over", "GET", "/jobs?limit=1001", nil, 400, "invalid_argument"},
		{"jobs: bad cursor", "GET", "/jobs?cursor=%21%21", nil, 400, "invalid_argument"},
		{"tasks: bad state", "GET", "/jobs/" + j.JobID + "/tasks?state=x", nil, 400, "invalid_argument"},
		{"tasks: unknown job", "GET", "/jobs/s0:nope/tasks", nil, 404, "not_found"},
		{"job: unknown", "GET", "/jobs/s0:nope", nil, 404, "not_found"},
		{"job: NUL in id", "GET", "/jobs/s0:%00x", nil, 404, "not_found"},
		{"job: NUL in upload id", "POST", "/jobs", jobBody(1, map[string]any{"input": map[string]any{"upload_id": "s0:\u0000"}}), 400, "invalid_argument"},
		{"job: NUL in name", "POST", "/jobs", jobBody(1, map[string]any{"name": "a\u0000b"}), 400, "invalid_argument"},
		{"cancel: unknown", "POST", "/jobs/s0:nope/cancel", nil, 404, "not_found"},
		{"result: unknown", "GET", "/jobs/s0:nope/result", nil, 404, "not_found"},
		{"result: not ready", "GET", "/jobs/" + j.JobID + "/result", nil, 409, "not_ready"},
		{"task: unknown", "GET", "/tasks/s0:nope", nil, 404, "not_found"},
		{"route: unknown", "GET", "/nope", nil, 404, "not_found"},
		{"claim: no worker", "POST", "/tasks/claim", map[string]any{}, 400, "invalid_argument"},
		{"claim: bad worker", "POST", "/tasks/claim", map[string]any{"worker_id": "a b"}, 400, "invalid_argument"},
		{"claim: long worker", "POST", "/tasks/claim", map[string]any{"worker_id": strings.Repeat("w", 129)}, 400, "invalid_argument"},
		{"claim: wait 61", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "wait_seconds": 61}, 400, "invalid_argument"},
		{"claim: wait negative", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "wait_seconds": -1}, 400, "invalid_argument"},
		{"claim: max_tasks 0", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "max_tasks": 0}, 400, "invalid_argument"},
		{"claim: max_tasks 1001", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "max_tasks": 1001}, 400, "invalid_argument"},
		{"claim: workloads string", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "workloads": "tanimoto"}, 400, "invalid_argument"},
		{"claim: unknown field", "POST", "/tasks/claim", map[string]any{"worker_id": "w", "max": 2}, 400, "invalid_argument"},
		{"heartbeat: no attempt", "POST", taskPath + "/heartbeat", map[string]any{"worker_id": "w"}, 400, "invalid_argument"},
		{"heartbeat: attempt string", "POST", taskPath + "/heartbeat", map[string]any{"worker_id": "w", "attempt": "1"}, 400, "invalid_argument"},
		{"heartbeat: unknown task", "POST", "/tasks/s0:nope/heartbeat", map[string]any{"worker_id": "w", "attempt": 1}, 404, "not_found"},
		{"result: no output", "POST", taskPath + "/result", map[string]any{"worker_id": "w", "attempt": 1}, 400, "invalid_argument"},
		{"result: empty output", "POST", taskPath + "/result", result("w", 1, ""), 400, "invalid_argument"},
		{"result: no score column", "POST", taskPath + "/result", result("w", 1, "id,value\na,1\n"), 400, "invalid_argument"},
		{"result: score not a number", "POST", taskPath + "/result", result("w", 1, "id,score\na,high\n"), 400, "invalid_argument"},
		{"result: score infinite", "POST", taskPath + "/result", result("w", 1, "id,score\na,+Inf\n"), 400, "invalid_argument"},
		{"result: ragged row", "POST", taskPath + "/result", result("w", 1, "id,score\na,1,extra\n"), 400, "invalid_argument"},
		{"result: too many rows", "POST", taskPath + "/result", result("w", 1, "id,score\n"+strings.Repeat("a,1\n", 101)), 400, "invalid_argument"},
		{"result: metrics array", "POST", taskPath + "/result", map[string]any{"worker_id": "w", "attempt": 1, "output": "id,score\n", "metrics": []int{1}}, 400, "invalid_argument"},
		{"result: task_id in body", "POST", taskPath + "/result", map[string]any{"task_id": "x", "worker_id": "w", "attempt": 1, "output": "id,score\n"}, 400, "invalid_argument"},
		{"failure: unknown field", "POST", taskPath + "/failure", map[string]any{"worker_id": "w", "attempt": 1, "reason": "x"}, 400, "invalid_argument"},
		{"failure: retryable string", "POST", taskPath + "/failure", map[string]any{"worker_id": "w", "attempt": 1, "retryable": "no"}, 400, "invalid_argument"},
		{"batch: empty", "POST", "/tasks/results", map[string]any{"results": []any{}}, 400, "invalid_argument"},
		{"batch: over 1000", "POST", "/tasks/results", map[string]any{"results": make([]map[string]any, 1001)}, 400, "invalid_argument"},
	}
	for _, tt := range tests {
		token := tokens.Client
		if strings.HasPrefix(tt.path, "/tasks/") && tt.method == "POST" {
			token = tokens.Worker
		}
		r := b.do(tt.method, tt.path, token, tt.body)
		if r.status != tt.status || r.errCode() != tt.code {
			t.Errorf("%s: %s %s = %s, want %d %s", tt.name, tt.method, tt.path, r, tt.status, tt.code)
			continue
		}
		if msg := errMessage(r); len(msg) < 10 {
			t.Errorf("%s: error message %q does not tell the user what is wrong", tt.name, msg)
		}
	}
	// Nothing changed: one job, its one leased task still held by w at attempt 1.
	var list struct{ Jobs []job }
	b.mustStatus(b.client("GET", "/jobs", nil), 200).decode(t, &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("bad requests created jobs: %d exist, want 1", len(list.Jobs))
	}
	got := b.getTask(tk.TaskID)
	if got.State != "leased" || got.Attempt != 1 || *got.LeaseOwner != "w" || got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(*tk.LeaseExpiresAt) {
		t.Fatalf("bad requests changed the task: %+v", got)
	}
	// The lease stays after a refused result: the worker can still finish.
	b.mustStatus(b.worker("POST", taskPath+"/result", result("w", 1, "id,score\na,1\n")), 200)
}

func errMessage(r response) string {
	var e struct{ Error struct{ Message string } }
	if err := jsonUnmarshal(r.body, &e); err != nil {
		return ""
	}
	return e.Error.Message
}
