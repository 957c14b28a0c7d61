package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a server on SQLite in a directory of t's, on a free
// loopback port, without tokens, logging nothing.
func testConfig(t *testing.T) Config {
	dir := t.TempDir()
	return Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(dir, "scimesh.db"), DataDir: dir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestRun: a server answers once New returns and Run runs, serves REST
// and its data directory, and once ctx is done stops, releasing its port.
func TestRun(t *testing.T) {
	t.Parallel()
	srv, err := New(t.Context(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || srv.Engine().Shard() != "s0" {
		t.Fatalf("URL %s, shard %s; want a loopback URL and shard s0", srv.URL(), srv.Engine().Shard())
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := srv.Start(ctx)
	cl := client.New(srv.URL(), "")
	defer cl.CloseIdleConnections()
	if err := cl.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	up, err := cl.Upload(ctx, strings.NewReader("id,x\na,1\n"))
	if err != nil || up.Rows != 2 {
		t.Fatalf("upload: %+v, %v; want 2 rows stored in the data directory", up, err)
	}
	cancel()
	if err := wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := srv.Run(context.Background()); err == nil {
		t.Error("a second Run did not fail")
	}
	if conn, err := net.Dial("tcp", srv.Addr()); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Run returned", srv.Addr())
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close after Run: %v", err)
	}
}

// TestCloseWithoutRun: a server that is never run releases its port and
// its store on Close.
func TestCloseWithoutRun(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	srv, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	cfg.Addr = srv.Addr() // free again
	again, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New on the port and database of a closed server: %v", err)
	}
	again.Close()
}

// TestNewFails: a database New cannot open, or an address it cannot
// listen on, is an error that says which.
func TestNewFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DB = "mysql://db.example/scimesh"
	if _, err := New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "use sqlite:PATH or postgres://") {
		t.Errorf("New with a MySQL URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg = testConfig(t)
	cfg.Addr = ln.Addr().String()
	if _, err := New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "listen on "+cfg.Addr) {
		t.Errorf("New on a taken port: %v", err)
	}
}

func TestGuardHost(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		host string
		open bool
		want int
	}{
		{"evil.example", true, http.StatusMisdirectedRequest},
		{"evil.example:8080", true, http.StatusMisdirectedRequest},
		{"10.1.2.3", true, http.StatusMisdirectedRequest},
		{"localhost", true, 200},
		{"127.0.0.1:8080", true, 200},
		{"[::1]:9", true, 200},
		{"coordinator.example", false, 200}, // with tokens the Host is not looked at
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://x/jobs", nil)
		req.Host = c.host
		guardHost(ok, c.open).ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("open %v, Host %q: %d, want %d", c.open, c.host, rec.Code, c.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "LOCALHOST.:8080": true, "[::1]:80": true, "127.9.9.9:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "example.com:80": false, "127.0.0.1": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestWarnFIFO: a server with FIFO scheduling names, as it starts, the
// accounts whose weight or max_running its claims do not apply.
func TestWarnFIFO(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	srv, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := domain.WithCaller(t.Context(), domain.Caller{Account: "admin", Admin: true})
	for _, a := range []domain.Account{{Name: "heavy", Weight: 3}, {Name: "capped", Weight: 1, MaxRunning: 2}, {Name: "plain", Weight: 1}} {
		if _, _, err := srv.Engine().CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	for _, sched := range []engine.Scheduling{engine.SchedulingFIFO, engine.SchedulingFair} {
		var logs strings.Builder
		cfg.Scheduling, cfg.Logger = sched, slog.New(slog.NewTextHandler(&logs, nil))
		srv, err := New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		l := logs.String()
		warned := strings.Contains(l, "do not apply") && strings.Contains(l, "heavy") && strings.Contains(l, "capped")
		if warned != (sched == engine.SchedulingFIFO) || strings.Contains(l, "plain") {
			t.Errorf("scheduling %s logged:\n%s\nwant a warning naming heavy and capped only with fifo", sched, logs.String())
		}
	}
}
