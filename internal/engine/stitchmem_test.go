package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
)

// bigOutput is chunk c's output of rows rows, "id,score", with scores
// spread so that the merge keeps replacing rows; the same (c, rows) always
// gives the same bytes.
func bigOutput(c, rows int) []byte {
	var b bytes.Buffer
	b.Grow(rows * 16)
	b.WriteString("id,score\n")
	for r := range rows {
		v := uint64(c)*2654435761 + uint64(r)*40503 + 12345
		v ^= v >> 13
		v *= 0x9E3779B97F4A7C15
		b.WriteString(strconv.Itoa(c))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(r))
		b.WriteByte(',')
		b.WriteString(strconv.FormatUint(v>>44, 10)) // 20 bits: ties happen
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// completeBigJob creates a job of chunks chunks with lease_seconds 5 and
// max_attempts 1, top_k rows, and records bigOutput(i, rows) for every
// chunk i, leaving its stitch task pending. It returns the job's ID.
func completeBigJob(tb testing.TB, e *engine.Engine, chunks, rows int) string {
	tb.Helper()
	ctx := context.Background()
	sp := spec(chunks)
	sp.TopK, sp.LeaseSeconds, sp.MaxAttempts = rows, 5, 1
	v, _, err := e.CreateJob(ctx, sp, "")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		// Ten at a time: under -race on a loaded machine, checking fifty
		// outputs of 10,000 rows took longer than their 5 s leases.
		tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 10})
		if err != nil {
			tb.Fatal(err)
		}
		if len(tasks) == 0 {
			return v.ID
		}
		items := make([]engine.CompleteTaskParams, len(tasks))
		for i, tk := range tasks {
			items[i] = engine.CompleteTaskParams{TaskID: tk.ID, WorkerID: "w", Attempt: tk.Attempt, Output: bigOutput(tk.ChunkIndex, rows)}
		}
		for _, r := range e.CompleteTasks(ctx, items) {
			if r.Err != nil {
				tb.Fatal(r.Err)
			}
		}
	}
}

// heapSampler records, every millisecond until stopped, the peak of the Go
// heap (live and not yet collected objects) above a baseline taken after a
// full collection, and the peak of the process's anonymous resident memory
// (RssAnon: the heap as the system sees it, and whatever the SQLite
// driver allocates outside it; not the database file's pages that SQLite
// maps, which are the page cache's) above its baseline.
type heapSampler struct {
	base, anonBase uint64
	peak, anonPeak uint64
	stop           chan struct{}
	wg             sync.WaitGroup
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	debug.FreeOSMemory()
	h := &heapSampler{base: heapObjects(), anonBase: procStatus("RssAnon"), stop: make(chan struct{})}
	h.wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := heapObjects(); v > h.peak {
				h.peak = v
			}
			if v := procStatus("RssAnon"); v > h.anonPeak {
				h.anonPeak = v
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	})
	return h
}

// Stop ends the sampling and returns the peak growth of the heap and of
// the anonymous resident memory over their baselines.
func (h *heapSampler) Stop() (heap, anon uint64) {
	close(h.stop)
	h.wg.Wait()
	if v := heapObjects(); v > h.peak {
		h.peak = v
	}
	return h.peak - min(h.base, h.peak), h.anonPeak - min(h.anonBase, h.anonPeak)
}

// procStatus returns a field of /proc/self/status in bytes (VmHWM, VmRSS),
// or 0 where there is none.
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetHWM returns the process's freed memory to the system and resets
// its peak resident size (VmHWM) to the current one, so that the next
// VmHWM is the peak of what follows. It reports whether it could.
func resetHWM() bool {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// stitchMemory is what one measured stitch took.
type stitchMemory struct {
	heap    uint64        // peak growth of the Go heap
	anon    uint64        // peak growth of the anonymous resident memory; 0 when unknown
	rss     uint64        // peak growth of the resident set (VmHWM over VmRSS before), the mapped database file included; 0 when unknown
	elapsed time.Duration // StitchReadyJobs's wall time
}

func (m stitchMemory) String() string {
	return fmt.Sprintf("heap peak +%.1f MiB, anonymous RSS peak +%.1f MiB, RSS peak (mapped database file included) +%.1f MiB, %v",
		float64(m.heap)/(1<<20), float64(m.anon)/(1<<20), float64(m.rss)/(1<<20), m.elapsed.Round(time.Millisecond))
}

// measureStitch runs the stitcher once over the pending stitch of jobID and
// checks that the job completed.
func measureStitch(tb testing.TB, e *engine.Engine, jobID string) stitchMemory {
	tb.Helper()
	var m stitchMemory
	var rssBefore uint64
	if resetHWM() {
		rssBefore = procStatus("VmRSS")
	}
	h := startHeapSampler()
	start := time.Now()
	n, err := e.StitchReadyJobs(context.Background())
	m.elapsed = time.Since(start)
	m.heap, m.anon = h.Stop()
	if rssBefore > 0 {
		if hwm := procStatus("VmHWM"); hwm > rssBefore {
			m.rss = hwm - rssBefore
		}
	}
	if err != nil || n != 1 {
		tb.Fatalf("StitchReady = %d, %v; want 1 job stitched", n, err)
	}
	v, err := e.GetJob(context.Background(), jobID)
	if err != nil {
		tb.Fatal(err)
	}
	if v.Status != domain.JobCompleted {
		tb.Fatalf("job %s is %s (%s) after the stitch; want completed", jobID, v.Status, v.Error)
	}
	return m
}

// BenchmarkStitchMemory measures the stitch of a job of 2,000 chunks whose
// outputs have 10,000 rows each (top_k 10,000) on SQLite: its time and the
// peak growth of the heap, of the anonymous resident memory and of the
// whole resident set, the pages of the database file that SQLite maps
// included (reported as heap-MiB, anon-MiB and rss-MiB). Run it with -benchtime=1x -count=N.
func BenchmarkStitchMemory(b *testing.B) {
	chunks, rows := 2000, 10000
	if s := os.Getenv("SCIMESH_STITCH_CHUNKS"); s != "" {
		chunks, _ = strconv.Atoi(s)
	}
	for b.Loop() {
		b.StopTimer()
		e := newEngine(openStore(b), engine.Config{})
		id := completeBigJob(b, e, chunks, rows)
		b.StartTimer()
		m := measureStitch(b, e, id)
		b.ReportMetric(float64(m.heap)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(m.anon)/(1<<20), "anon-MiB")
		b.ReportMetric(float64(m.rss)/(1<<20), "rss-MiB")
		b.Logf("%d chunks × %d rows: %v", chunks, rows, m)
	}
}

// TestStitchMemoryBounded: a job with lease_seconds 5 and max_attempts 1
// whose chunk outputs have 10,000 rows each (top_k 10,000) completes, and
// the stitch's heap grows by a bound far below what the outputs take
// together: it holds a page of outputs and the best top_k rows, not every
// output. Without the race detector: 2,000 chunks (about 320 MiB of
// outputs) against a bound of 96 MiB (the stitch measures 15-22 MiB).
// With it, which slows SQLite about a hundredfold and inflates the heap:
// 200 chunks (about 30 MiB of outputs), pages of about 256 KiB, against
// 12 MiB (it measures about 4 MiB).
func TestStitchMemoryBounded(t *testing.T) {
	chunks, bound := 2000, uint64(96<<20)
	if raceEnabled {
		chunks, bound = 200, 12<<20
	}
	if testing.Short() {
		t.Skip("builds a job of 10,000-row outputs; not in -short")
	}
	e := newEngine(openStore(t), engine.Config{})
	if raceEnabled {
		e.SetStitchPageBytes(256 << 10)
	}
	id := completeBigJob(t, e, chunks, 10000)
	total := chunks * len(bigOutput(chunks-1, 10000))
	m := measureStitch(t, e, id)
	t.Logf("%d chunks × 10,000 rows (%.0f MiB of outputs): %v", chunks, float64(total)/(1<<20), m)
	if m.heap > bound {
		t.Errorf("the stitch's heap grew by %.1f MiB; want at most %.0f MiB (the outputs take %.0f MiB together)",
			float64(m.heap)/(1<<20), float64(bound)/(1<<20), float64(total)/(1<<20))
	}
	if uint64(total) < 2*bound {
		t.Fatalf("the outputs take %d bytes, less than twice the bound: the test cannot tell a bounded stitch", total)
	}
}
