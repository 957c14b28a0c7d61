package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// benchQuiet is how long bench create measures the workers alone, before
// the creation and after it.
const benchQuiet = 3 * time.Second

// benchCreate measures a job creation under load: the workers of drive run
// on the seeded job, alone for c.Quiet (benchQuiet), then while a job of
// c.CreateChunks hosted chunks is created with one POST /jobs, then alone
// again for as long. One more worker holds a lease and heartbeats it
// every 20 ms throughout. It reports the creation's time and, for each
// window, the workers' lifecycles per second and their longest claim,
// result and heartbeat.
func benchCreate(ctx context.Context, out io.Writer, base string, c benchConfig) error {
	chunks := make([]map[string]string, c.CreateChunks)
	for i := range chunks {
		chunks[i] = map[string]string{"uri": fmt.Sprintf("https://bench.invalid/big/%d", i), "sha256": strings.Repeat("0", 64)}
	}
	body, err := json.Marshal(map[string]any{"name": "big", "workload": "big", "top_k": 1, "lease_seconds": 600,
		"input": map[string]any{"chunks": chunks}})
	if err != nil {
		return err
	}
	chunks = nil
	quiet := c.Quiet
	if quiet <= 0 {
		quiet = benchQuiet
	}

	hb, err := startHeartbeats(ctx, base)
	if err != nil {
		return err
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	results := make(chan benchResult, 1)
	start := time.Now()
	go func() { results <- drive(wctx, base, c) }()

	time.Sleep(quiet)
	t0 := time.Now()
	resp, err := http.Post(base+"/jobs", "application/json", bytes.NewReader(body))
	t1 := time.Now()
	if err != nil {
		stopWorkers()
		<-results
		return fmt.Errorf("create the big job: %w", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		stopWorkers()
		<-results
		return fmt.Errorf("create the big job: %d %s", resp.StatusCode, raw)
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
		c.CreateChunks, float64(len(body))/1e6, t1.Sub(t0).Round(time.Millisecond), c.Workers, c.Batch)
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

func last(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1].Round(10 * time.Microsecond)
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
	err    error
}

// startHeartbeats claims one task on base and heartbeats it until stop.
func startHeartbeats(ctx context.Context, base string) (*heartbeats, error) {
	var task struct {
		TaskID  string `json:"task_id"`
		Attempt int    `json:"attempt"`
	}
	data, _ := json.Marshal(map[string]any{"worker_id": "bench-heartbeat"})
	resp, err := http.Post(base+"/tasks/claim", "application/json", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	err = json.NewDecoder(resp.Body).Decode(&task)
	resp.Body.Close()
	if err != nil || task.TaskID == "" {
		return nil, fmt.Errorf("claim a task to heartbeat: %d %v", resp.StatusCode, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &heartbeats{cancel: cancel, done: make(chan struct{})}
	body, _ := json.Marshal(map[string]any{"worker_id": "bench-heartbeat", "attempt": task.Attempt})
	go func() {
		defer close(h.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			t0 := time.Now()
			resp, err := http.Post(base+"/tasks/"+task.TaskID+"/heartbeat", "application/json", bytes.NewReader(body))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("heartbeat: %d", resp.StatusCode)
				}
			}
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
