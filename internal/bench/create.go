package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// DefaultQuiet is how long a run with Config.CreateChunks measures the
// workers alone, before the creation and after it.
const DefaultQuiet = 3 * time.Second

// create measures a job creation under load: the workers of drive run on
// the seeded job, alone for c.Quiet (DefaultQuiet), then while a job of
// c.CreateChunks hosted chunks is created with one POST /jobs, then alone
// again for as long. One more worker holds a lease and heartbeats it
// every 20 ms throughout. It reports the creation's time and, for each
// window, the workers' lifecycles per second and their longest claim,
// result and heartbeat.
func create(ctx context.Context, out io.Writer, base string, c Config) error {
	chunks := make([]client.ChunkRef, c.CreateChunks)
	for i := range chunks {
		chunks[i] = client.ChunkRef{URI: fmt.Sprintf("https://bench.invalid/big/%d", i), SHA256: strings.Repeat("0", 64)}
	}
	req := &client.JobRequest{Name: "big", Workload: "big", TopK: 1, LeaseSeconds: 600, Input: client.JobInput{Chunks: chunks}}
	body, err := json.Marshal(req) // what the client sends, for its size
	if err != nil {
		return err
	}
	size := len(body)
	body = nil
	quiet := c.Quiet
	if quiet <= 0 {
		quiet = DefaultQuiet
	}

	hb, err := startHeartbeats(ctx, base)
	if err != nil {
		return err
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	results := make(chan result, 1)
	start := time.Now()
	go func() { results <- drive(wctx, base, "", nil, c) }()

	time.Sleep(quiet)
	// The creating client has no timeout beyond the run's, and its request
	// is not cut off when the workers stop.
	cl := client.New(base, "", client.WithTimeout(0))
	defer cl.CloseIdleConnections()
	t0 := time.Now()
	_, err = cl.CreateJob(context.WithoutCancel(ctx), req, "")
	t1 := time.Now()
	if err != nil {
		stopWorkers()
		<-results
		hb.stop()
		return fmt.Errorf("create the big job: %w", err)
	}
	time.Sleep(quiet)
	stopWorkers()
	res := <-results
	end := time.Now()
	beats := hb.stop()
	if res.err != nil {
		return fmt.Errorf("%w (with --create-chunks, --tasks must outlast the creation)", res.err)
	}

	fmt.Fprintf(out, "created a job of %d hosted chunks (%.0f MB of JSON) over REST in %v, while %d workers (batch %d) ran another job\n",
		c.CreateChunks, float64(size)/1e6, t1.Sub(t0).Round(time.Millisecond), c.Workers, c.Batch)
	for _, w := range []struct {
		name     string
		from, to time.Time
	}{{"before", start, t0}, {"during", t0, t1}, {"after", t1, end}} {
		var n int
		var claims, resultsIn []time.Duration
		for _, s := range res.samples {
			if s.end.Before(w.from) || !s.end.Before(w.to) {
				continue
			}
			n += s.tasks
			claims = append(claims, s.claim)
			resultsIn = append(resultsIn, s.result)
		}
		var hbs []time.Duration
		for _, b := range beats {
			if !b.end.Before(w.from) && b.end.Before(w.to) {
				hbs = append(hbs, b.took)
			}
		}
		slices.Sort(claims)
		slices.Sort(resultsIn)
		slices.Sort(hbs)
		secs := w.to.Sub(w.from).Seconds()
		fmt.Fprintf(out, "  %-6s %6.1fs: %.0f lifecycles/s; claim p99 %v max %v; result p99 %v max %v; heartbeat max %v (%d)\n",
			w.name, secs, float64(n)/secs, pct(claims, 99), last(claims), pct(resultsIn, 99), last(resultsIn), last(hbs), len(hbs))
	}
	return nil
}

// beat is one timed heartbeat.
type beat struct {
	end  time.Time
	took time.Duration
}

// heartbeats is a worker that holds one lease and renews it every 20 ms.
type heartbeats struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	beats  []beat
	err    error // the first heartbeat that failed
}

// startHeartbeats claims one task on base and heartbeats it until stop.
func startHeartbeats(ctx context.Context, base string) (*heartbeats, error) {
	const id = "bench-heartbeat"
	cl := client.New(base, "", client.WithTimeout(0))
	task, err := cl.Claim(ctx, client.ClaimRequest{WorkerID: id})
	if err == nil && task == nil {
		err = fmt.Errorf("no task to claim")
	}
	if err != nil {
		cl.CloseIdleConnections()
		return nil, fmt.Errorf("claim a task to heartbeat: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &heartbeats{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer cl.CloseIdleConnections()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			t0 := time.Now()
			_, err := cl.Heartbeat(context.WithoutCancel(ctx), task.TaskID, id, task.Attempt)
			h.mu.Lock()
			h.beats = append(h.beats, beat{end: time.Now(), took: time.Since(t0)})
			if err != nil && h.err == nil {
				h.err = err
			}
			h.mu.Unlock()
		}
	}()
	return h, nil
}

// stop ends the heartbeats and returns them.
func (h *heartbeats) stop() []beat {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beats
}
