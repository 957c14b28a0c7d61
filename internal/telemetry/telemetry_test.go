package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/telemetry"
)

// logBuffer collects JSON log records.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the records logged so far with message msg.
func (l *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// setup serves a mux like the coordinator's (a REST API behind its own
// mux at "/", a service under its prefix) through Wrap.
func setup(t *testing.T) (*telemetry.Metrics, *logBuffer, string) {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m := telemetry.New(log)
	api := http.NewServeMux()
	api.HandleFunc("GET /jobs/{job_id}", func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "handler ran", "job_id", r.PathValue("job_id"))
		_, _ = io.WriteString(w, `{"job_id":"x"}`)
	})
	api.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the middleware: %v", err)
		}
		_, _ = io.Copy(w, strings.NewReader("bcd")) // through ReadFrom
	})
	mux := http.NewServeMux()
	mux.Handle("/scimesh.v1.Queue/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("/", api)
	srv := httptest.NewServer(m.Wrap(mux, log))
	t.Cleanup(srv.Close)
	return m, logs, srv.URL
}

func get(t *testing.T, method, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	_, logs, url := setup(t)

	resp, _ := get(t, "GET", url+"/jobs/s0:abc", map[string]string{"X-Request-ID": "req-42.a:b"})
	if got := resp.Header.Get("X-Request-ID"); got != "req-42.a:b" {
		t.Errorf("echoed X-Request-ID %q, want req-42.a:b", got)
	}
	resp, _ = get(t, "GET", url+"/jobs/s0:def", nil)
	generated := resp.Header.Get("X-Request-ID")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(generated) {
		t.Errorf("generated X-Request-ID %q, want 32 hex digits", generated)
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129), "quote\"d"} {
		resp, _ = get(t, "GET", url+"/jobs/s0:ghi", map[string]string{"X-Request-ID": bad})
		if got := resp.Header.Get("X-Request-ID"); got == bad || len(got) != 32 {
			t.Errorf("X-Request-ID %q answered with %q, want a new ID", bad, got)
		}
	}

	lines := logs.records(t, "request")
	if len(lines) != 5 {
		t.Fatalf("%d request lines, want 5", len(lines))
	}
	want := map[string]any{"level": "INFO", "method": "GET", "route": "GET /jobs/{job_id}", "path": "/jobs/s0:abc",
		"status": float64(200), "bytes": float64(len(`{"job_id":"x"}`)), "request_id": "req-42.a:b"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("request line %s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
	if _, ok := lines[0]["duration_ms"].(float64); !ok {
		t.Errorf("request line without duration_ms: %v", lines[0])
	}
	if lines[1]["request_id"] != generated {
		t.Errorf("second request line has request_id %v, want the generated %s", lines[1]["request_id"], generated)
	}
	// A record the handler logged with the request's context carries the ID.
	handled := logs.records(t, "handler ran")
	if len(handled) != 5 || handled[0]["request_id"] != "req-42.a:b" || handled[1]["request_id"] != generated {
		t.Errorf("handler records %v, want request_id req-42.a:b then %s", handled, generated)
	}
	// Logging the request line with the ID and the context does not repeat the key.
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if n := strings.Count(logs.b.String(), `"request_id"`); n != 10 {
		t.Errorf("request_id appears %d times in the log, want 10 (once per record)", n)
	}
}

func TestLogHandlerWithoutRequest(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(telemetry.NewLogHandler(slog.NewTextHandler(&buf, nil))).With("k", "v").WithGroup("g")
	log.InfoContext(context.Background(), "no request", "a", 1)
	log.InfoContext(telemetry.WithRequestID(context.Background(), "r1"), "in request", "a", 2)
	got := buf.String()
	if strings.Count(got, "request_id") != 1 || !strings.Contains(got, `msg="in request" k=v g.a=2 g.request_id=r1`) {
		t.Errorf("log:\n%s", got)
	}
}

// scrape parses the metrics served at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, body := get(t, "GET", url+"/metrics", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return mfs
}

// find returns the metric of family name whose labels include want.
func find(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	_, _, url := setup(t)
	get(t, "GET", url+"/jobs/s0:1", nil)
	get(t, "GET", url+"/jobs/s0:2", nil)
	if _, body := get(t, "GET", url+"/stream", nil); body != "abcd" {
		t.Errorf("stream body %q, want abcd", body)
	}
	get(t, "POST", url+"/scimesh.v1.Queue/Submit", nil)
	get(t, "BREW", url+"/nowhere", nil)
	mfs := scrape(t, url)
	for _, c := range []struct {
		labels map[string]string
		n      uint64
	}{
		{map[string]string{"method": "GET", "route": "GET /jobs/{job_id}", "code": "200"}, 2},
		{map[string]string{"method": "GET", "route": "GET /stream", "code": "200"}, 1},
		{map[string]string{"method": "POST", "route": "/scimesh.v1.Queue/", "code": "418"}, 1},
		{map[string]string{"method": "other", "route": "unmatched", "code": "404"}, 1},
	} {
		m := find(mfs, "scimesh_http_request_duration_seconds", c.labels)
		if m == nil || m.GetHistogram().GetSampleCount() != c.n {
			t.Errorf("scimesh_http_request_duration_seconds%v: %v, want count %d", c.labels, m, c.n)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if mfs[name] == nil {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
}

// fakeState is a State with fixed figures, or failing.
type fakeState struct{ err error }

func (f fakeState) CountTasks(context.Context) ([]store.TaskCount, error) {
	return []store.TaskCount{{Kind: domain.KindChunk, State: domain.TaskPending, N: 7}}, f.err
}

func (f fakeState) GetOutboxStats(context.Context) (store.OutboxStats, error) {
	return store.OutboxStats{Pending: 2, Dead: 1, Oldest: time.Now().Add(-time.Minute)}, f.err
}

func (f fakeState) CountWaiting() (claims, streams int) { return 4, 2 }

func TestStateMetrics(t *testing.T) {
	t.Parallel()
	m := telemetry.New(slog.New(slog.DiscardHandler))
	m.Watch(fakeState{}, nil)
	m.Claimed(domain.KindChunk, 3, time.Millisecond)
	m.Failed(domain.KindTree, true)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	mfs := scrape(t, srv.URL)
	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		x := find(mfs, name, labels)
		if x == nil {
			t.Fatalf("no %s%v", name, labels)
		}
		return x.GetGauge().GetValue()
	}
	if got := gauge("scimesh_tasks", map[string]string{"kind": "chunk", "state": "pending"}); got != 7 {
		t.Errorf("chunk tasks pending %v, want 7", got)
	}
	if got := gauge("scimesh_tasks", map[string]string{"kind": "tree", "state": "leased"}); got != 0 {
		t.Errorf("tree tasks leased %v, want 0", got)
	}
	if n := len(mfs["scimesh_tasks"].GetMetric()); n != 18 {
		t.Errorf("%d series of scimesh_tasks, want 18 (3 kinds × 6 states)", n)
	}
	if c, s := gauge("scimesh_waiting_claims", nil), gauge("scimesh_open_streams", nil); c != 4 || s != 2 {
		t.Errorf("waiting claims %v and open streams %v, want 4 and 2", c, s)
	}
	if got := gauge("scimesh_outbox_pending_messages", nil); got != 2 {
		t.Errorf("outbox pending %v, want 2", got)
	}
	if got := gauge("scimesh_outbox_dead_messages", nil); got != 1 {
		t.Errorf("outbox dead %v, want 1", got)
	}
	if got := gauge("scimesh_outbox_oldest_pending_age_seconds", nil); got < 59 || got > 120 {
		t.Errorf("outbox oldest age %v, want about 60", got)
	}
	if x := find(mfs, "scimesh_task_claims_total", map[string]string{"kind": "chunk"}); x.GetCounter().GetValue() != 3 {
		t.Errorf("claims %v, want 3", x)
	}
	if x := find(mfs, "scimesh_task_failures_total", map[string]string{"kind": "tree", "final": "true"}); x.GetCounter().GetValue() != 1 {
		t.Errorf("failures %v, want 1", x)
	}

	// A database that does not answer costs its figures, not the scrape.
	down := telemetry.New(slog.New(slog.DiscardHandler))
	down.Watch(fakeState{err: context.DeadlineExceeded}, nil)
	srv2 := httptest.NewServer(down.Handler())
	defer srv2.Close()
	mfs = scrape(t, srv2.URL)
	if mfs["scimesh_tasks"] != nil || mfs["go_goroutines"] == nil {
		t.Errorf("with the database down: scimesh_tasks %v, go_goroutines %v; want only the latter",
			mfs["scimesh_tasks"] != nil, mfs["go_goroutines"] != nil)
	}
}

func TestRetentionMetrics(t *testing.T) {
	t.Parallel()
	m := telemetry.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	mfs := scrape(t, srv.URL)
	if c := find(mfs, "scimesh_retention_deleted_total", map[string]string{"kind": "job"}); c == nil || c.GetCounter().GetValue() != 0 {
		t.Errorf("jobs deleted before any pass: %v, want 0", c)
	}
	m.Deleted("job", 2, 0)
	m.Deleted("task", 300, 0)
	m.Deleted("file", 1, 4096)
	m.Deleted("file", 2, 10)
	mfs = scrape(t, srv.URL)
	for kind, want := range map[string]float64{"job": 2, "task": 300, "file": 3, "log": 0} {
		c := find(mfs, "scimesh_retention_deleted_total", map[string]string{"kind": kind})
		if c == nil || c.GetCounter().GetValue() != want {
			t.Errorf("scimesh_retention_deleted_total{kind=%q} = %v, want %v", kind, c, want)
		}
	}
	if c := find(mfs, "scimesh_retention_deleted_bytes_total", nil); c == nil || c.GetCounter().GetValue() != 4106 {
		t.Errorf("scimesh_retention_deleted_bytes_total = %v, want 4106", c)
	}
}
