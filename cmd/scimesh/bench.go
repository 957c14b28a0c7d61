package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
)

// benchConfig says what `scimesh bench` measures.
type benchConfig struct {
	DB      string
	Workers int
	Backlog int
	Tasks   int
	Batch   int
	Profile string
	// CreateChunks, when positive, has bench create one more job of that
	// many hosted chunks over REST while the workers run (see benchCreate).
	CreateChunks int
	// Quiet is how long benchCreate runs the workers alone before and
	// after the creation; 0 means benchQuiet.
	Quiet time.Duration
	// LogLevel is the server's: warn (the default) leaves out the line
	// serve logs at info for every request.
	LogLevel slog.Level
}

func newBenchCmd() *cobra.Command {
	var c benchConfig
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure task lifecycles per second through a real server",
		Long: `bench starts a coordinator on a real HTTP listener, seeds a backlog of
pending tasks, and drives it with concurrent no-op workers (claim, then
result) until --tasks lifecycles completed. It reports lifecycles per second
and the latency of claims.

--db sqlite:PATH or postgres://… uses that database; "sqlite" (the default)
uses a new SQLite file in a temporary directory, and "postgres" starts a
throwaway PostgreSQL cluster from the installed server binaries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	cmd.AddCommand(newBenchUploadCmd())
	f := cmd.Flags()
	f.StringVar(&c.DB, "db", "sqlite", `database: "sqlite", "postgres", sqlite:PATH or postgres://…`)
	f.IntVar(&c.Workers, "workers", 32, "concurrent workers")
	f.IntVar(&c.Backlog, "backlog", 10000, "pending tasks left over when the measured ones are done")
	f.IntVar(&c.Tasks, "tasks", 30000, "task lifecycles to measure")
	f.IntVar(&c.Batch, "batch", 1, "tasks per claim (max_tasks) and per result request; 1 uses the single forms")
	f.IntVar(&c.CreateChunks, "create-chunks", 0, "while the workers run, create a job of this many hosted chunks over REST and report the workers' throughput and worst waits during its creation; --tasks must outlast it")
	f.StringVar(&c.Profile, "cpuprofile", "", "write a CPU profile of the measured part to this file")
	c.LogLevel = slog.LevelWarn
	f.TextVar(&c.LogLevel, "log-level", &c.LogLevel, "the server's log level, to stderr: info logs every request as serve does by default")
	return cmd
}

func runBench(ctx context.Context, out io.Writer, c benchConfig) error {
	if c.Workers < 1 || c.Tasks < c.Workers || c.Backlog < 0 || c.Batch < 1 || c.Batch > engine.MaxClaimTasks {
		return fmt.Errorf("need --workers ≥ 1, --tasks ≥ --workers, --backlog ≥ 0 and --batch 1-%d", engine.MaxClaimTasks)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, cleanup, err := benchDatabase(ctx, c.DB)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := openStore(ctx, url, true)
	if err != nil {
		return err
	}
	defer st.Close()
	log := newLogger(c.LogLevel)
	eng := engine.New(st, engine.Config{Shard: "s0", Logger: log})

	seedStart := time.Now()
	jobID, err := seedBacklog(ctx, eng, c.Backlog+c.Tasks)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "store %s: seeded %d pending tasks in %v\n", storeKind(url), c.Backlog+c.Tasks, time.Since(seedStart).Round(time.Millisecond))

	base, waitServer, err := startLocal(ctx, eng, log)
	if err != nil {
		return err
	}

	stop, err := startProfile(c.Profile)
	if err != nil {
		return err
	}
	if c.CreateChunks > 0 {
		err := benchCreate(ctx, out, base, c)
		stop()
		cancel()
		_ = waitServer()
		return err
	}
	res := drive(ctx, base, c)
	stop()
	if res.err != nil {
		return res.err
	}
	counts, err := st.TaskCountByJob(ctx, []string{jobID})
	left := counts[jobID]
	if err != nil {
		return err
	}
	slices.Sort(res.latencies)
	fmt.Fprintf(out, "workers %d, batch %d, backlog %d: %d lifecycles in %v = %.0f lifecycles/s; claim p50 %v p99 %v (%d claims); pending after %d\n",
		c.Workers, c.Batch, c.Backlog, res.done, res.elapsed.Round(time.Millisecond),
		float64(res.done)/res.elapsed.Seconds(), pct(res.latencies, 50), pct(res.latencies, 99), len(res.latencies), left.Pending)
	cancel()
	_ = waitServer()
	return nil
}

func storeKind(url string) string {
	kind, _, _ := strings.Cut(url, ":")
	return kind
}

// benchDatabase resolves --db to a database URL and a cleanup.
func benchDatabase(ctx context.Context, db string) (string, func(), error) {
	switch db {
	case "sqlite":
		dir, err := os.MkdirTemp("", "scimesh-bench-")
		if err != nil {
			return "", nil, err
		}
		return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
	case "postgres":
		cl, err := pgtest.StartCluster(ctx, pgtest.Options{})
		if err != nil {
			return "", nil, fmt.Errorf("start a throwaway PostgreSQL: %w", err)
		}
		url, err := cl.CreateDatabase(ctx, "bench")
		if err != nil {
			cl.Stop()
			return "", nil, err
		}
		return url, func() { cl.Stop() }, nil
	}
	return db, func() {}, nil
}

// seedBacklog creates one job of n chunks through the engine.
func seedBacklog(ctx context.Context, eng *engine.Engine, n int) (string, error) {
	chunks := make([]domain.ChunkRef, n)
	for i := range chunks {
		chunks[i] = domain.ChunkRef{URI: fmt.Sprintf("https://bench.invalid/%d", i), SHA256: strings.Repeat("0", 64)}
	}
	v, _, err := eng.CreateJob(ctx, &domain.JobSpec{
		Name: "bench", Workload: "noop", Parameters: json.RawMessage("{}"), Chunks: chunks,
		ChunkRows: 1, HasHeader: true, TopK: 1, ScoreColumn: "score", Order: domain.Desc,
		MaxAttempts: 3, LeaseSeconds: 600,
	}, "")
	if err != nil {
		return "", fmt.Errorf("seed backlog: %w", err)
	}
	return v.ID, nil
}

type benchResult struct {
	done      int64
	elapsed   time.Duration
	latencies []time.Duration
	// samples are every lifecycle's claim and result requests, in no
	// particular order, for measuring a window of the run (benchCreate).
	samples []lifecycle
	err     error
}

// lifecycle is one claim and its result(s), as a worker timed them.
type lifecycle struct {
	end           time.Time // when the result was answered
	claim, result time.Duration
	tasks         int
}

// drive runs the workers until c.Tasks lifecycles completed.
func drive(ctx context.Context, base string, c benchConfig) benchResult {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Workers * 2}}
	var (
		done      atomic.Int64
		remaining atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		samples   []lifecycle
		firstErr  error
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	post := func(path string, body any, out any) (int, error) {
		data, _ := json.Marshal(body)
		resp, err := client.Post(base+path, "application/json", bytes.NewReader(data))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode >= 300 {
			return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
		}
		if out != nil && len(raw) > 0 {
			return resp.StatusCode, json.Unmarshal(raw, out)
		}
		return resp.StatusCode, nil
	}
	type claimedTask struct {
		TaskID  string `json:"task_id"`
		Attempt int    `json:"attempt"`
	}
	remaining.Store(int64(c.Tasks))
	start := time.Now()
	for w := range c.Workers {
		wg.Go(func() {
			id := fmt.Sprintf("bench-%d", w)
			var local []time.Duration
			var mine []lifecycle
			defer func() {
				mu.Lock()
				lat = append(lat, local...)
				samples = append(samples, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				n := reserve(&remaining, int64(c.Batch))
				if n == 0 {
					return
				}
				t0 := time.Now()
				var tasks []claimedTask
				if n == 1 {
					var one claimedTask
					if _, err := post("/tasks/claim", map[string]any{"worker_id": id}, &one); err != nil {
						fail(err)
						return
					}
					tasks = []claimedTask{one}
				} else {
					var many struct{ Tasks []claimedTask }
					if _, err := post("/tasks/claim", map[string]any{"worker_id": id, "max_tasks": n}, &many); err != nil {
						fail(err)
						return
					}
					tasks = many.Tasks
				}
				claimed := time.Since(t0)
				local = append(local, claimed)
				if len(tasks) == 0 {
					fail(fmt.Errorf("claim found nothing with tasks left; the backlog ran out"))
					return
				}
				t1 := time.Now()
				if c.Batch == 1 {
					t := tasks[0]
					if _, err := post("/tasks/"+t.TaskID+"/result", map[string]any{"worker_id": id, "attempt": t.Attempt, "output": "id,score\nx,1\n"}, nil); err != nil {
						fail(err)
						return
					}
				} else {
					items := make([]map[string]any, len(tasks))
					for i, t := range tasks {
						items[i] = map[string]any{"task_id": t.TaskID, "worker_id": id, "attempt": t.Attempt, "output": "id,score\nx,1\n"}
					}
					var res struct{ Results []struct{ Status int } }
					if _, err := post("/tasks/results", map[string]any{"results": items}, &res); err != nil {
						fail(err)
						return
					}
					for _, r := range res.Results {
						if r.Status != 200 {
							fail(fmt.Errorf("result item: status %d", r.Status))
							return
						}
					}
				}
				end := time.Now()
				mine = append(mine, lifecycle{end: end, claim: claimed, result: end.Sub(t1), tasks: len(tasks)})
				done.Add(int64(len(tasks)))
			}
		})
	}
	wg.Wait()
	return benchResult{done: done.Load(), elapsed: time.Since(start), latencies: lat, samples: samples, err: firstErr}
}

// reserve takes up to n from *left and returns how many it took.
func reserve(left *atomic.Int64, n int64) int64 {
	for {
		l := left.Load()
		take := min(l, n)
		if take <= 0 {
			return 0
		}
		if left.CompareAndSwap(l, l-take) {
			return take
		}
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted) - 1) * p / 100
	return sorted[i].Round(10 * time.Microsecond)
}

// startProfile writes a CPU profile to path until stop is called; with an
// empty path it does nothing.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
