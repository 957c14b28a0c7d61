package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs bench small on SQLite, with the single and the batch forms
// and both load generators: every lifecycle is done, the backlog is left,
// and the line reads "workers W, batch B, backlog N: D lifecycles in T = R
// lifecycles/s; claim p50 … p99 … (C claims); pending after N".
func TestRun(t *testing.T) {
	t.Parallel()
	for _, run := range []struct {
		batch int
		load  string
	}{{1, LoadClient}, {8, LoadClient}, {1, LoadLean}, {8, LoadLean}} {
		batch := run.batch
		t.Run(fmt.Sprintf("batch%d-%s", batch, run.load), func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			if err := Run(context.Background(), &out, Config{DB: "sqlite", Workers: 4, Tasks: 203, Backlog: 17, Batch: batch, Load: run.load}); err != nil {
				t.Fatalf("bench: %v\n%s", err, out.String())
			}
			got := out.String()
			want := regexp.MustCompile(`^store sqlite: seeded 220 pending tasks in [0-9.]+m?s\n` +
				fmt.Sprintf(`workers 4, batch %d, backlog 17: 203 lifecycles in [0-9.]+m?s = [0-9]+ lifecycles/s; `, batch) +
				`claim p50 [0-9.]+[mµ]?s p99 [0-9.]+[mµ]?s \([0-9]+ claims\); pending after 17\n$`)
			if !want.MatchString(got) {
				t.Errorf("bench printed\n%s\nwant lines matching %s", got, want)
			}
		})
	}
}

// TestRunRefuses: settings that cannot be measured are refused before
// anything starts.
func TestRunRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{DB: "sqlite", Workers: 0, Tasks: 10, Batch: 1},
		{DB: "sqlite", Workers: 4, Tasks: 3, Batch: 1},
		{DB: "sqlite", Workers: 1, Tasks: 10, Batch: 0},
		{DB: "sqlite", Workers: 1, Tasks: 10, Batch: 1001},
		{DB: "sqlite", Workers: 1, Tasks: 10, Backlog: -1, Batch: 1},
	} {
		if err := Run(context.Background(), &strings.Builder{}, c); err == nil || !strings.Contains(err.Error(), "need --workers") {
			t.Errorf("Run(%+v): %v, want the settings refused", c, err)
		}
	}
}

// TestCreateChunks runs `scimesh-bench --create-chunks` small, on SQLite:
// the big job is created while the workers run, and each window reports
// lifecycles and heartbeats.
func TestCreateChunks(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := Run(context.Background(), &out, Config{
		DB: "sqlite", Workers: 4, Backlog: 0, Tasks: 10000, Batch: 1,
		CreateChunks: 3 * 5000, Quiet: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Log(got)
	if !strings.Contains(got, "created a job of 15000 hosted chunks (2 MB of JSON) over REST in ") {
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

// TestRunUpload measures a small generated table, once.
func TestRunUpload(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := RunUpload(context.Background(), &out, UploadConfig{Size: 1 << 20, Runs: 1, ChunkRows: 1000}); err != nil {
		t.Fatalf("bench upload: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, line := range []string{"file 1 MB, warm page cache, medians of 1 runs:\n", "  cat FILE >/dev/null ", "  POST /upload ",
		"  POST /jobs (chunking) ", "  upload + chunking "} {
		if !strings.Contains(got, line) {
			t.Errorf("no %q in\n%s", line, got)
		}
	}
}

// TestWriteTable: the generated table is about the size asked, with one
// quoted note in 50 rows.
func TestWriteTable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := WriteTable(path, 100_000); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(b) < 100_000 || len(b) > 100_000+400 || lines[0] != "id,fingerprint,note" {
		t.Fatalf("%d bytes, header %q; want 100,000 bytes and a little more, header id,fingerprint,note", len(b), lines[0])
	}
	if q := strings.Count(string(b), `"quoted, with a comma"`); q != (len(lines)-1+49)/50 {
		t.Errorf("%d quoted notes in %d rows, want one in 50", q, len(lines)-1)
	}
}

func TestReserve(t *testing.T) {
	t.Parallel()
	var left atomic.Int64
	left.Store(10)
	var got []int64
	for range 5 {
		got = append(got, reserve(&left, 4))
	}
	if fmt.Sprint(got) != "[4 4 2 0 0]" || left.Load() != 0 {
		t.Errorf("reserving 4 at a time from 10: %v, %d left; want [4 4 2 0 0], 0 left", got, left.Load())
	}
}

// TestWorkGivesBack: a worker whose turns find nothing (its account's
// votes wait for another account) gives its reservations back, and the
// other worker, though nothing was left when it looked, waits and takes
// them: every lifecycle is measured, by the worker that can.
func TestWorkGivesBack(t *testing.T) {
	t.Parallel()
	var nothing atomic.Int64
	res := work(t.Context(), Config{Workers: 2, Tasks: 40, Batch: 20}, func(id string, n int) (lifecycle, error) {
		if id == "bench-0" {
			nothing.Add(1)
			time.Sleep(time.Millisecond)
			return lifecycle{}, errNothing
		}
		time.Sleep(5 * time.Millisecond)
		return lifecycle{tasks: (n + 1) / 2}, nil // a claim filled by half
	})
	if res.err != nil || res.done != 40 {
		t.Errorf("work measured %d lifecycles (%v); want 40", res.done, res.err)
	}
	if nothing.Load() == 0 {
		t.Errorf("bench-0 never took a turn")
	}
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		d := make([]time.Duration, len(ns))
		for i, n := range ns {
			d[i] = time.Duration(n) * time.Millisecond
		}
		return d
	}
	for _, c := range []struct {
		sorted          []time.Duration
		p50, p99, worst time.Duration
	}{
		{nil, 0, 0, 0},
		{ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond},
		{[]time.Duration{1234567}, 1230 * time.Microsecond, 1230 * time.Microsecond, 1230 * time.Microsecond},
	} {
		if p50, p99, worst := pct(c.sorted, 50), pct(c.sorted, 99), last(c.sorted); p50 != c.p50 || p99 != c.p99 || worst != c.worst {
			t.Errorf("%v: p50 %v p99 %v max %v, want %v %v %v", c.sorted, p50, p99, worst, c.p50, c.p99, c.worst)
		}
	}
}
