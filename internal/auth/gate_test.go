package auth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/server"
)

var testTokens = auth.Tokens{
	Client: "client-token-0123456789abcdef",
	Worker: "worker-token-0123456789abcdef",
	Peer:   "peer-token-0123456789abcdef",
}

// grace is the slow-body grace of the tests' coordinators: short, so that
// a trickled body is cut within seconds.
const grace = time.Second

// startServer runs a coordinator with tokens on a free loopback port, its
// trickled bodies cut after grace, and returns its address.
func startServer(t *testing.T, cfg server.Config) string {
	t.Helper()
	dir := t.TempDir()
	cfg.Addr, cfg.Tokens = "127.0.0.1:0", testTokens
	cfg.DB, cfg.DataDir = "sqlite:"+filepath.Join(dir, "scimesh.db"), dir
	cfg.BodyGrace, cfg.BodyRate = grace, 1<<10
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := srv.Start(ctx)
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return srv.Addr()
}

// trickled is what a client that trickles its body saw.
type trickled struct {
	answer []byte        // every byte the server sent
	closed time.Duration // when the server closed the connection; 0: never
}

// trickle sends head (a request's header lines, its Content-Length far
// more than it will send) to addr, then one byte of body every 200 ms
// for as long as the server keeps the connection, at most until.
func trickle(addr, head string, until time.Duration) (trickled, error) {
	var out trickled
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return out, err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		return out, err
	}
	buf := make([]byte, 4096)
	for time.Since(start) < until {
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := conn.Read(buf)
		out.answer = append(out.answer, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			_, _ = conn.Write([]byte{' '}) // a closed connection's write fails; its read then says so
		default: // EOF, or a reset after the answer
			out.closed = time.Since(start)
			return out, nil
		}
	}
	return out, nil
}

// head is a request for path with a declared body of size bytes.
func head(path, ctype, token string, size int) string {
	h := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n", path, ctype, size)
	if token != "" {
		h += "Authorization: Bearer " + token + "\r\n"
	}
	return h + "\r\n"
}

// TestGateTrickledBody: a body that trickles in is cut off, and the answer
// reaches its client, on a connection the server then closes, within the
// grace and a few seconds — on REST, Connect and a dashboard form alike.
func TestGateTrickledBody(t *testing.T) {
	t.Parallel()
	addr := startServer(t, server.Config{})
	const form = "application/x-www-form-urlencoded"
	for _, c := range []struct{ name, head, status string }{
		{"REST job", head("/jobs", "application/json", testTokens.Client, 100000), " 400 "},
		{"REST upload", head("/upload", "text/csv", testTokens.Client, 100000), " 400 "},
		{"REST claim", head("/tasks/claim", "application/json", testTokens.Worker, 100000), " 400 "},
		{"Connect", head("/scimesh.v1.Queue/Submit", "application/json", testTokens.Client, 100000), " 400 "},
		{"dashboard login", head("/ui/login", form, "", 50000), " 400 "},
		{"dashboard form", head("/ui/jobs/s0:1/cancel", form, testTokens.Client, 50000), " 400 "},
		// Refused before the body is read: the answer does not wait for it.
		{"REST without a token", head("/jobs", "application/json", "", 100000), " 401 "},
		{"Connect without a token", head("/scimesh.v1.Queue/Submit", "application/json", "", 100000), " 401 "},
		{"dashboard form over its bound", head("/ui/jobs/s0:1/cancel", form, testTokens.Client, 100000), " 413 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := trickle(addr, c.head, grace+8*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			status, _, _ := bytes.Cut(got.answer, []byte("\r\n"))
			if !bytes.HasPrefix(status, []byte("HTTP/1.1 ")) || !bytes.Contains(status, []byte(c.status)) {
				t.Errorf("answer %q, want a status line with%s", got.answer, c.status)
			}
			if got.closed == 0 || got.closed > grace+2*time.Second {
				t.Errorf("the connection was closed after %v (0: not in %v), want within %v", got.closed, grace+8*time.Second, grace+2*time.Second)
			}
		})
	}
}

// TestGateTrickledBodies: five hundred trickling clients at once are all
// answered and let go within the grace and a few seconds, and the server
// then holds no more descriptors or goroutines than before they came.
func TestGateTrickledBodies(t *testing.T) {
	addr := startServer(t, server.Config{})
	const clients = 500
	// One client first, so that what the server starts once (its
	// database connections, say) is in the baseline.
	if _, err := trickle(addr, head("/jobs", "application/json", testTokens.Client, 100000), grace+10*time.Second); err != nil {
		t.Fatal(err)
	}
	fds, goroutines := openFiles(t), runtime.NumGoroutine()

	var wg sync.WaitGroup
	results := make([]trickled, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			results[i], errs[i] = trickle(addr, head("/jobs", "application/json", testTokens.Client, 100000), grace+10*time.Second)
		})
	}
	wg.Wait()
	var late []string
	var slowest time.Duration
	for i, r := range results {
		slowest = max(slowest, r.closed)
		switch {
		case errs[i] != nil:
			t.Fatalf("client %d: %v", i, errs[i])
		case !bytes.Contains(r.answer, []byte(" 400 ")):
			late = append(late, fmt.Sprintf("client %d: answer %q", i, r.answer))
		case r.closed == 0 || r.closed > grace+5*time.Second:
			late = append(late, fmt.Sprintf("client %d: closed after %v", i, r.closed))
		}
	}
	if len(late) > 0 {
		t.Fatalf("%d of %d trickling clients were not answered and let go within %v; first: %s", len(late), clients, grace+5*time.Second, late[0])
	}
	t.Logf("%d trickling clients, grace %v: the last connection was closed after %v", clients, grace, slowest.Round(time.Millisecond))
	// The descriptors and goroutines go back to what they were.
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, g := openFiles(t), runtime.NumGoroutine()
		if f <= fds && g <= goroutines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the clients left: %d open files and %d goroutines, against %d and %d before", f, g, fds, goroutines)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count the open descriptors: %v", err)
	}
	return len(ents)
}
