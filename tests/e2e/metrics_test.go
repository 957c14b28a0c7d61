package e2e

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/telemetry"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/tests/framework/inprocess"
)

// testClock is real time moved forward by advance.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// scrapeMetrics reads and parses GET /metrics.
func scrapeMetrics(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return mfs
}

// metricValue returns the value of the series of family name with exactly
// labels (a histogram's sample count), and whether there is one.
func metricValue(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsFigures runs a server built as serve builds it, on SQLite with a clock
// of its own, does known work over REST and Connect, and checks every
// figure of GET /metrics against it.
func TestMetricsFigures(t *testing.T) {
	t.Parallel()
	logs := &testenv.Buffer{}
	log := slog.New(telemetry.NewLogHandler(slog.NewTextHandler(logs, nil)))
	clock := &testClock{}
	srv, _ := inprocess.Start(t, server.Config{Addr: "127.0.0.1:0", Shard: "s0", DB: "sqlite:" + filepath.Join(t.TempDir(), "scimesh.db"),
		Logger: log, Now: clock.now, ReapInterval: 20 * time.Millisecond, StitchInterval: 20 * time.Millisecond})
	base := srv.URL()

	const worker, treeWorker, name = "worker-alpha-7", "tree-worker-9", "secret-job-name"
	// Job a: 4 chunks. Job b: 2 chunks, one attempt each, claimed first.
	var a, b jobOut
	if s := call(t, "POST", base+"/jobs", "", map[string]any{"name": name, "workload": "w", "top_k": 1, "lease_seconds": 30,
		"input": map[string]any{"chunks": chunkList(4)}}, &a); s != 201 {
		t.Fatalf("create job a: %d", s)
	}
	if s := call(t, "POST", base+"/jobs", "", map[string]any{"name": name, "workload": "w", "top_k": 1, "max_attempts": 1,
		"priority": 5, "input": map[string]any{"chunks": chunkList(2)}}, &b); s != 201 {
		t.Fatalf("create job b: %d", s)
	}
	// Claim b's first chunk and fail it for good: b fails, its other chunk
	// is cancelled and its stitch task fails.
	var b0 taskOut
	if s := call(t, "POST", base+"/tasks/claim", "", map[string]any{"worker_id": worker}, &b0); s != 200 || b0.JobID != b.JobID {
		t.Fatalf("claim: %d %+v, want a task of job b", s, b0)
	}
	if s := call(t, "POST", base+"/tasks/"+b0.TaskID+"/failure", "", map[string]any{"worker_id": worker, "attempt": 1,
		"error": "bad input", "retryable": false}, nil); s != 200 {
		t.Fatalf("failure: %d", s)
	}
	// Claim 3 of a's chunks, complete one, and let the other two expire.
	var claimed struct{ Tasks []taskOut }
	if s := call(t, "POST", base+"/tasks/claim", "", map[string]any{"worker_id": worker, "max_tasks": 3}, &claimed); s != 200 || len(claimed.Tasks) != 3 {
		t.Fatalf("claim 3: %d, %d tasks", s, len(claimed.Tasks))
	}
	if s := call(t, "POST", base+"/tasks/"+claimed.Tasks[0].TaskID+"/result", "", map[string]any{"worker_id": worker, "attempt": 1,
		"output": "id,score\nx,1\n"}, nil); s != 200 {
		t.Fatalf("result: %d", s)
	}
	clock.advance(31 * time.Second)
	for _, tk := range claimed.Tasks[1:] {
		deadline := time.Now().Add(10 * time.Second)
		for {
			var got struct{ State string }
			call(t, "GET", base+"/tasks/"+tk.TaskID, "", nil, &got)
			if got.State == "pending" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %s 10 s after its lease expired, want pending", tk.TaskID, got.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A Connect call: a tree worker's poll, with nothing to run.
	req, _ := http.NewRequest("POST", base+"/scimesh.v1.Worker/Poll", strings.NewReader(`{"workerId":"`+treeWorker+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-ID", "poll-request-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-ID") != "poll-request-1" {
		t.Fatalf("Poll: %d, X-Request-ID %q", resp.StatusCode, resp.Header.Get("X-Request-ID"))
	}
	if s := call(t, "GET", base+"/jobs/"+a.JobID, "", nil, nil); s != 200 {
		t.Fatalf("get job: %d", s)
	}

	mfs := scrapeMetrics(t, base)
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		got, ok := metricValue(mfs, name, labels)
		if !ok || got != want {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
		}
	}
	// Tasks by state, exactly: a has 1 completed and 3 pending chunks and a
	// waiting stitch task; b a failed and a cancelled chunk and a failed
	// stitch task. Every other kind and state reads 0.
	tasks := map[[2]string]float64{
		{"chunk", "completed"}: 1, {"chunk", "pending"}: 3, {"chunk", "failed"}: 1, {"chunk", "cancelled"}: 1,
		{"stitch", "waiting"}: 1, {"stitch", "failed"}: 1,
	}
	for _, kind := range []string{"chunk", "stitch", "tree"} {
		for _, state := range []string{"waiting", "pending", "leased", "completed", "failed", "cancelled"} {
			check("scimesh_tasks", map[string]string{"kind": kind, "state": state}, tasks[[2]string{kind, state}])
		}
	}
	if n := len(mfs["scimesh_tasks"].GetMetric()); n != 18 {
		t.Errorf("%d series of scimesh_tasks, want 18", n)
	}
	check("scimesh_task_claims_total", map[string]string{"kind": "chunk"}, 4)
	check("scimesh_task_claims_total", map[string]string{"kind": "tree"}, 0)
	check("scimesh_claim_duration_seconds", map[string]string{"kind": "chunk"}, 2)
	check("scimesh_claim_duration_seconds", map[string]string{"kind": "tree"}, 1)
	check("scimesh_task_completions_total", map[string]string{"kind": "chunk"}, 1)
	check("scimesh_task_failures_total", map[string]string{"kind": "chunk", "final": "true"}, 1)
	if _, ok := metricValue(mfs, "scimesh_task_failures_total", map[string]string{"kind": "chunk", "final": "false"}); ok {
		t.Error("a retryable failure counted; there was none")
	}
	check("scimesh_lease_expiries_total", map[string]string{"kind": "chunk", "final": "false"}, 2)
	// HTTP requests by route pattern, never by path.
	route := func(method, pattern, code string) map[string]string {
		return map[string]string{"method": method, "route": pattern, "code": code}
	}
	check("scimesh_http_request_duration_seconds", route("POST", "POST /jobs", "201"), 2)
	check("scimesh_http_request_duration_seconds", route("POST", "POST /tasks/claim", "200"), 2)
	check("scimesh_http_request_duration_seconds", route("POST", "POST /tasks/{task_id}/failure", "200"), 1)
	check("scimesh_http_request_duration_seconds", route("POST", "POST /tasks/{task_id}/result", "200"), 1)
	check("scimesh_http_request_duration_seconds", route("GET", "GET /jobs/{job_id}", "200"), 1)
	check("scimesh_http_request_duration_seconds", route("POST", "/scimesh.v1.Worker/", "200"), 1)
	if _, ok := metricValue(mfs, "scimesh_http_request_duration_seconds", route("GET", "GET /tasks/{task_id}", "200")); !ok {
		t.Error("no series for GET /tasks/{task_id}")
	}
	// The outbox (empty without peers) and both SQLite pools.
	check("scimesh_outbox_pending_messages", nil, 0)
	check("scimesh_outbox_dead_messages", nil, 0)
	check("scimesh_outbox_oldest_pending_age_seconds", nil, 0)
	for _, pool := range []string{"writer", "reader"} {
		for _, name := range []string{"scimesh_db_pool_open_connections", "scimesh_db_pool_in_use_connections",
			"scimesh_db_pool_idle_connections", "scimesh_db_pool_max_connections", "scimesh_db_pool_waits_total",
			"scimesh_db_pool_wait_seconds_total"} {
			if _, ok := metricValue(mfs, name, map[string]string{"pool": pool}); !ok {
				t.Errorf("no %s{pool=%q}", name, pool)
			}
		}
	}
	check("scimesh_db_pool_max_connections", map[string]string{"pool": "writer"}, 1)
	if open, _ := metricValue(mfs, "scimesh_db_pool_open_connections", map[string]string{"pool": "writer"}); open != 1 {
		t.Errorf("writer pool has %v connections open, want 1", open)
	}

	// No label value names a job, task or worker.
	secrets := []string{worker, treeWorker, name, a.JobID, b.JobID, b0.TaskID}
	for _, tk := range claimed.Tasks {
		secrets = append(secrets, tk.TaskID)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, s := range secrets {
					if strings.Contains(l.GetValue(), s) || strings.Contains(l.GetValue(), "s0:") {
						t.Errorf("%s has label %s=%q, which names %q", mf.GetName(), l.GetName(), l.GetValue(), s)
					}
				}
			}
		}
	}

	// Logs: one line per request with its route and ID, and the engine's
	// records of a request carry that request's ID.
	out := logs.String()
	re := regexp.MustCompile(`msg=request method=POST route=/scimesh.v1.Worker/ path=/scimesh.v1.Worker/Poll status=200 bytes=\d+ duration_ms=\S+ request_id=poll-request-1\n`)
	if !re.MatchString(out) {
		t.Errorf("no request line for Poll with its request ID in the log:\n%s", out)
	}
	m := regexp.MustCompile(`msg="job created" job_id=` + regexp.QuoteMeta(a.JobID) + `\S* .*request_id=([0-9a-f]{32})\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the engine's \"job created\" record has no request_id:\n%s", out)
	}
	if !strings.Contains(out, `msg=request method=POST route="POST /jobs" path=/jobs status=201`) ||
		!regexp.MustCompile(`route="POST /jobs" .* request_id=`+m[1]+`\n`).MatchString(out) {
		t.Errorf("no POST /jobs request line with request_id %s:\n%s", m[1], out)
	}
}

// TestServeMetricsAndRequestIDs checks the wiring of `scimesh serve`: a
// real coordinator answers GET /metrics without a token, with its pools and
// the engine's counters, and logs every request with its ID.
func TestServeMetricsAndRequestIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	if s := call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, nil); s != 204 {
		t.Fatalf("claim: %d", s)
	}
	req, _ := http.NewRequest("GET", p.URL+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer ctok")
	req.Header.Set("X-Request-ID", "list-jobs-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-ID"); resp.StatusCode != 200 || got != "list-jobs-1" {
		t.Fatalf("GET /jobs: %d, X-Request-ID %q", resp.StatusCode, got)
	}
	mfs := scrapeMetrics(t, p.URL) // without a token
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"scimesh_claim_duration_seconds", map[string]string{"kind": "chunk"}, 1},
		{"scimesh_tasks", map[string]string{"kind": "chunk", "state": "pending"}, 0},
		{"scimesh_db_pool_max_connections", map[string]string{"pool": "writer"}, 1},
		{"scimesh_http_request_duration_seconds", map[string]string{"method": "GET", "route": "GET /jobs", "code": "200"}, 1},
	} {
		if got, ok := metricValue(mfs, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.Stderr.String(), `msg=request method=GET route="GET /jobs" path=/jobs status=200`) ||
		!strings.Contains(p.Stderr.String(), "request_id=list-jobs-1") {
		if time.Now().After(deadline) {
			t.Fatalf("no request line with request_id=list-jobs-1:\n%s", p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(p.Stderr.String(), "route=\"GET /ready\"") {
		t.Errorf("readiness probes logged at Info:\n%s", p.Stderr.String())
	}
}
