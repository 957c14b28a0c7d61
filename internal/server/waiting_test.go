package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// deadPostgres is the URL of a PostgreSQL database on a loopback port that
// nothing listens on: every connection to it is refused.
func deadPostgres(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "postgres://postgres@" + addr + "/scimesh?sslmode=disable"
}

// TestWaitForDatabase: a server whose PostgreSQL database does not answer
// serves anyway. /health is 200; /ready and gRPC health are 503
// unavailable to anyone; every other REST route and RPC is 401 without a
// known token and 503 unavailable, with Retry-After, in the REST API's or
// the RPC protocol's form with one; it keeps trying and logs the refusal
// once. Ending ctx ends Run at once, with no error.
func TestWaitForDatabase(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	tokens := auth.Tokens{Client: "client-token-0123456789", Worker: "worker-token-0123456789", Peer: "peer-token-0123456789"}
	srv, err := New(t.Context(), Config{Addr: "127.0.0.1:0", DB: deadPostgres(t), WaitForDatabase: true, Tokens: tokens,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New with a database that does not answer: %v", err)
	}
	if srv.Engine() != nil {
		t.Fatal("Engine is not nil without a database")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := srv.Start(ctx)
	hc := rpc.H2CClient() // HTTP/1.1 for REST, h2c for gRPC
	defer hc.CloseIdleConnections()

	rest := func(method, path, token, body string) (*http.Response, map[string]map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]map[string]string
		data, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(data, &out)
		return resp, out
	}
	if resp, _ := rest("GET", "/health", "", ""); resp.StatusCode != 200 {
		t.Errorf("GET /health: %d, want 200", resp.StatusCode)
	}
	if resp, _ := rest("GET", "/metrics", "", ""); resp.StatusCode != 200 {
		t.Errorf("GET /metrics: %d, want 200", resp.StatusCode)
	}
	for _, c := range []struct {
		method, path, token, body string
		status                    int
		code                      string
	}{
		{"GET", "/ready", "", "", 503, "unavailable"},
		{"GET", "/jobs", "", "", 401, "unauthenticated"},
		{"GET", "/jobs", "not-a-token", "", 401, "unauthenticated"},
		{"POST", "/tasks/claim", "", `{"worker_id":"w"}`, 401, "unauthenticated"},
		{"GET", "/jobs", tokens.Client, "", 503, "unavailable"},
		{"POST", "/jobs", tokens.Client, `{"workload":"w"}`, 503, "unavailable"},
		{"POST", "/tasks/claim", tokens.Worker, `{"worker_id":"w"}`, 503, "unavailable"},
		{"GET", "/ui/", tokens.Client, "", 503, "unavailable"},
	} {
		resp, out := rest(c.method, c.path, c.token, c.body)
		if resp.StatusCode != c.status || out["error"]["code"] != c.code {
			t.Errorf("%s %s with token %q: %d %v, want %d %s", c.method, c.path, c.token, resp.StatusCode, out, c.status, c.code)
		}
		if c.status == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
		if c.body != "" && !resp.Close {
			t.Errorf("%s %s: the connection that brought a body unread is kept open", c.method, c.path)
		}
	}

	for _, c := range []struct {
		token string
		want  connect.Code
	}{{"", connect.CodeUnauthenticated}, {tokens.Worker, connect.CodeUnavailable}, {tokens.Client, connect.CodeUnavailable}} {
		var opts []connect.ClientOption
		if c.token != "" {
			opts = append(opts, connect.WithInterceptors(rpc.Bearer(c.token)))
		}
		for _, proto := range []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()} { // gRPC; Connect
			q := scimeshv1connect.NewQueueClient(hc, srv.URL(), append(opts, proto)...)
			_, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: "s0:t1"}))
			if got := connect.CodeOf(err); got != c.want {
				t.Errorf("Queue.Query with token %q: %v, want %v", c.token, err, c.want)
			}
			var ce *connect.Error
			if c.want == connect.CodeUnavailable && errors.As(err, &ce) && ce.Meta().Get("Retry-After") == "" {
				t.Errorf("Queue.Query with token %q: unavailable without Retry-After", c.token)
			}
		}
	}
	_, err = grpchealth.NewClient(hc, srv.URL(), connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("gRPC health without a token: %v, want unavailable", err)
	}

	// The log says once that the database refuses connections, however
	// many times the server tried (three tries take under a second).
	time.Sleep(time.Second)
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, logs.String())
	}
	start := time.Now()
	cancel()
	if err := wait(); err != nil {
		t.Errorf("Run ended by ctx while waiting: %v, want nil", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %v to end while waiting for the database", d)
	}
}

// TestWaitForDatabaseNotSQLite: a SQLite database that cannot be opened
// (here: its directory is a file) is a mistake of the settings, not an outage: New fails at once, waiting
// or not.
func TestWaitForDatabaseNotSQLite(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(file, "scimesh.db")
	cfg.WaitForDatabase = true
	if srv, err := New(t.Context(), cfg); err == nil {
		srv.Close()
		t.Fatal("New with a SQLite file under a file, not a directory, did not fail")
	}
}

// TestNoWaitWithoutOption: without WaitForDatabase, a database that does
// not answer fails New, as `scimesh-bench` needs (it uses the engine as
// soon as New returns).
func TestNoWaitWithoutOption(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DB = deadPostgres(t)
	srv, err := New(t.Context(), cfg)
	if err == nil {
		srv.Close()
		t.Fatal("New without WaitForDatabase succeeded on a database that does not answer")
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("New: %v, want the refusal", err)
	}
}
