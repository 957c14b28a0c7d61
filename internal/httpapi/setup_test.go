package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/httpapi"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/telemetry"
	"github.com/scimesh/scimesh/internal/ui"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bundle is what a test gets from setup: a real HTTP listener over a real store.
type bundle struct {
	t      *testing.T
	url    string
	store  store.Store
	engine *engine.Engine
	clock  *enginetest.Clock
	tokens auth.Tokens
	// dataDir holds the engine's blobs.
	dataDir string
}

type options struct {
	tokens    auth.Tokens
	postgres  bool
	noLoops   bool // do not run the reaper and stitcher in the background
	frozen    bool // time moves only by Advance
	maxUpload int64
	// wrap, when set, stands between the engine and the store: a test
	// watches or breaks the store's calls through it.
	wrap func(store.Store) store.Store
	// wrapBlobs, when set, stands between the engine and its blob store.
	wrapBlobs func(blob.Store) blob.Store
}

func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "scimesh.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func postgresStore(t *testing.T) store.Store {
	t.Helper()
	url := pgtest.URL(t)
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func setup(t *testing.T, opts options) *bundle {
	t.Helper()
	var st store.Store
	if opts.postgres {
		st = postgresStore(t)
	} else {
		st = sqliteStore(t)
	}
	c := &enginetest.Clock{} // real time
	if opts.frozen {
		c = enginetest.NewClock(time.Now())
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := t.TempDir()
	blobs, err := blob.OpenDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var engBlobs blob.Store = blobs
	if opts.wrapBlobs != nil {
		engBlobs = opts.wrapBlobs(blobs)
	}
	engStore := st
	if opts.wrap != nil {
		engStore = opts.wrap(st)
	}
	eng := engine.New(engStore, engine.Config{
		Shard: "s0", Logger: log, Now: c.Now, Blobs: engBlobs,
		ReapInterval: 50 * time.Millisecond, StitchInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond,
	})
	gate := auth.NewGate(opts.tokens)
	api := httpapi.New(eng, gate, log, opts.maxUpload)
	metrics := telemetry.New(log)
	metrics.Watch(eng, st)
	dash, err := ui.New(eng, ui.Config{Gate: gate, Logger: log, MaxUpload: api.MaxUpload()})
	if err != nil {
		t.Fatal(err)
	}
	api.Metrics, api.UI = metrics.Handler(), dash
	srv := httptest.NewServer(api)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if !opts.noLoops {
		wg.Go(func() { eng.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		srv.Close()
	})
	return &bundle{t: t, url: srv.URL, store: st, engine: eng, clock: c, tokens: opts.tokens, dataDir: dataDir}
}

// response is an HTTP answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v, failing the test when it cannot.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errCode returns the code of an error body, "" when there is none.
func (r response) errCode() string {
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// do sends a request with token (none when empty) and body (a string or
// bytes as is, anything else as JSON; nil for none).
func (b *bundle) do(method, path, token string, body any, headers ...string) response {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(v))
	case []byte:
		rd = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			b.t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		b.t.Fatalf("new request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil && !strings.HasPrefix(path, "/upload") {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("read %s %s: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// client and worker send with the role's token.
func (b *bundle) client(method, path string, body any, headers ...string) response {
	b.t.Helper()
	return b.do(method, path, b.tokens.Client, body, headers...)
}

func (b *bundle) worker(method, path string, body any) response {
	b.t.Helper()
	return b.do(method, path, b.tokens.Worker, body)
}

func (b *bundle) mustStatus(r response, want int) response {
	b.t.Helper()
	if r.status != want {
		b.t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
	return r
}

// job and task are the JSON shapes the tests read.
type job struct {
	JobID      string     `json:"job_id"`
	Name       string     `json:"name"`
	Workload   string     `json:"workload"`
	Status     string     `json:"status"`
	Priority   int        `json:"priority"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      *string    `json:"error"`
	Progress   float64    `json:"progress"`
	Tasks      struct {
		Total, Pending, Leased, Completed, Failed, Cancelled int
	} `json:"tasks"`
	ProgressToken string          `json:"progress_token"`
	TopK          int             `json:"top_k"`
	ScoreColumn   string          `json:"score_column"`
	Order         string          `json:"order"`
	Parameters    json.RawMessage `json:"parameters"`
	// SpeculateAfter is a pointer so that a missing field shows.
	SpeculateAfter *float64 `json:"speculate_after"`
}

type task struct {
	TaskID         string          `json:"task_id"`
	JobID          string          `json:"job_id"`
	ChunkIndex     int             `json:"chunk_index"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	Workload       string          `json:"workload"`
	Parameters     json.RawMessage `json:"parameters"`
	TopK           int             `json:"top_k"`
	ScoreColumn    string          `json:"score_column"`
	Order          string          `json:"order"`
	HasHeader      bool            `json:"has_header"`
	Input          struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
		Bytes  int64  `json:"bytes"`
	} `json:"input"`
	State      string  `json:"state"`
	LeaseOwner *string `json:"lease_owner"`
	Error      *string `json:"error"`
}

// chunks returns n chunk references.
func chunks(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		sum := sha256.Sum256(fmt.Appendf(nil, "chunk %d", i))
		out[i] = map[string]any{"uri": fmt.Sprintf("https://data.example.org/c%d.csv", i), "sha256": hex.EncodeToString(sum[:])}
	}
	return out
}

// jobBody is a valid POST /jobs body with n chunks; extra fields override.
func jobBody(n int, extra map[string]any) map[string]any {
	body := map[string]any{"workload": "tanimoto", "input": map[string]any{"chunks": chunks(n)}}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func (b *bundle) createJob(n int, extra map[string]any) job {
	b.t.Helper()
	var j job
	b.mustStatus(b.client("POST", "/jobs", jobBody(n, extra)), http.StatusCreated).decode(b.t, &j)
	return j
}

func (b *bundle) claim(worker string, extra map[string]any) (task, bool) {
	b.t.Helper()
	body := map[string]any{"worker_id": worker}
	for k, v := range extra {
		body[k] = v
	}
	r := b.worker("POST", "/tasks/claim", body)
	if r.status == http.StatusNoContent {
		return task{}, false
	}
	var tk task
	b.mustStatus(r, http.StatusOK).decode(b.t, &tk)
	return tk, true
}

func (b *bundle) getJob(id string) job {
	b.t.Helper()
	var j job
	b.mustStatus(b.client("GET", "/jobs/"+id, nil), http.StatusOK).decode(b.t, &j)
	return j
}

func (b *bundle) getTask(id string) task {
	b.t.Helper()
	var tk task
	b.mustStatus(b.client("GET", "/tasks/"+id, nil), http.StatusOK).decode(b.t, &tk)
	return tk
}

// waitJob polls until the job reaches status or the test times out.
func (b *bundle) waitJob(id, status string) job {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j := b.getJob(id)
		if j.Status == status {
			return j
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("job %s is %s after 20s, want %s", id, j.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func result(worker string, attempt int, output string) map[string]any {
	return map[string]any{"worker_id": worker, "attempt": attempt, "output": output}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
