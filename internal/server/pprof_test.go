package server

import (
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestStartPprof: the profiles answer on a loopback listener of their
// own, only to requests for a loopback name, and stop closes it; an
// address beyond loopback is refused.
func TestStartPprof(t *testing.T) {
	t.Parallel()
	if _, err := StartPprof("0.0.0.0:0", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "refusing --pprof 0.0.0.0:0") {
		t.Fatalf("StartPprof beyond loopback: %v, want refused", err)
	}
	var logged strings.Builder
	stop, err := StartPprof("127.0.0.1:0", slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(logged.String())
	if m == nil {
		t.Fatalf("no address logged: %q", logged.String())
	}
	url := "http://" + m[1] + "/debug/pprof/"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET %s: %d %.200s", url, resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "evil.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a request for another host: %v, %v; want 421", resp, err)
	} else {
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	stop()
	if _, err := http.Get(url); err == nil {
		t.Fatal("the profiles still answer after stop")
	}
}
