package main

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchCreateChunks runs `scimesh bench --create-chunks` small, on
// SQLite: the big job is created while the workers run, and each window
// reports lifecycles and heartbeats.
func TestBenchCreateChunks(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := runBench(context.Background(), &out, benchConfig{
		DB: "sqlite", Workers: 4, Backlog: 0, Tasks: 10000, Batch: 1,
		CreateChunks: 3 * 5000, Quiet: 300 * time.Millisecond, LogLevel: slog.LevelError,
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Log(got)
	if !strings.Contains(got, "created a job of 15000 hosted chunks") {
		t.Errorf("no creation reported:\n%s", got)
	}
	for _, w := range []string{"before", "during", "after"} {
		re := regexp.MustCompile(`(?m)^  ` + w + ` +[0-9.]+s: ([0-9]+) lifecycles/s;.* heartbeat max [^ ]+ \(([0-9]+)\)$`)
		m := re.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("no %q window reported:\n%s", w, got)
			continue
		}
		if m[1] == "0" || m[2] == "0" {
			t.Errorf("window %q: %s lifecycles/s and %s heartbeats, want some of each:\n%s", w, m[1], m[2], got)
		}
	}
}
