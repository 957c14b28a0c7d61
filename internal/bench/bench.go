// Package bench measures a real coordinator: task lifecycles per second
// (Run), a job's creation under load (Run with CreateChunks), and uploads
// with their chunking (RunUpload). Each builds its coordinator with
// internal/server, as `scimesh serve` does, on a real loopback listener,
// and drives it over HTTP through internal/client, as workers and users
// do (or, with Config.Load LoadLean, through a leaner client, lean.go);
// or, with Config.Coordinator, Run drives a coordinator already
// running in another process (remote.go), so that the load and the server
// do not share one process. `scimesh-bench` is its command;
// docs/PERFORMANCE.md quotes its output lines and the commands that print
// them.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgcluster"
	"github.com/scimesh/scimesh/internal/server"
)

// Config says what Run measures.
type Config struct {
	// DB is the database: "sqlite" for a new SQLite file in a temporary
	// directory, "postgres" for a throwaway PostgreSQL cluster started
	// from the installed server binaries (pgcluster), or a sqlite:PATH or
	// postgres://… URL.
	DB string
	// Workers is how many no-op workers run at once; Tasks how many
	// lifecycles (claim, then result) they complete; Backlog how many
	// pending tasks are left over when they are done.
	Workers, Tasks, Backlog int
	// Batch is how many tasks a worker claims at once (max_tasks) and
	// reports per results request; 1 uses the single forms.
	Batch int
	// Profile, when set, names a file for a CPU profile of the measured
	// part.
	Profile string
	// CreateChunks, when positive, has Run create one more job of that
	// many hosted chunks over REST while the workers run (see create.go).
	CreateChunks int
	// Quiet is how long the workers run alone before and after that
	// creation; 0 means DefaultQuiet.
	Quiet time.Duration
	// Logger is the server's; nil logs nothing.
	Logger *slog.Logger

	// Coordinator, when set, is the URL of a coordinator already running
	// (`scimesh serve`, in another process): Run seeds its own job, or
	// trees, there instead of starting a server, and DB is not used.
	Coordinator string
	// Version, when set, is the version of their workload the workers
	// announce in claims and send with results, as `scimesh worker`
	// does: the coordinator then remembers each output in its chunk
	// cache and looks claimed chunks up in it. It needs workloads named
	// (Coordinator set). The workers announce it before the job is
	// created, so that its creation looks its chunks up in the cache and
	// claims need not; AnnounceLate leaves that out, so that every claim
	// looks its chunks up.
	Version      string
	AnnounceLate bool
	// WorkerToken and ClientToken are the coordinator's
	// WORKER_AUTH_TOKEN and CLIENT_AUTH_TOKEN; empty sends none.
	WorkerToken, ClientToken string
	// Protocol is how the workers talk to the coordinator: ProtocolREST
	// (the default, "") or ProtocolGRPC (the Worker service's Poll and
	// Done over gRPC, on tree tasks; Batch must be 1).
	Protocol string
	// Shard is the coordinator's shard, which the placeholder IDs of the
	// trees seeded for ProtocolGRPC name; "" means "s0", serve's default.
	Shard string
	// Load is the REST load generator: LoadClient (the default, "") or
	// LoadLean.
	Load string

	// Accounts, when positive, with Coordinator: the run's tasks are the
	// work of that many accounts (weights Weights in turn, 1 when
	// empty), JobsPerAccount jobs each, shared by weight, made in the
	// coordinator's database, SeedDB (see fair.go); the report adds how
	// the lifecycles were shared.
	Accounts, JobsPerAccount int
	Weights                  []int
	SeedDB                   string
	// TaskTime is how long a worker holds each task it claims before it
	// sends the result; 0 sends it at once.
	TaskTime time.Duration

	// WorkerTokens, when set with Coordinator, are the tokens (worker
	// keys, say, of different accounts) the REST workers of the client
	// load generator use in turn, in place of WorkerToken.
	WorkerTokens []string
	// JobWorkers and Quorum are the workers mode and the quorum of the
	// job seeded over REST (domain.WorkerMode; "" for trusted); with
	// either, the report adds the job's chunks completed per second.
	JobWorkers string
	Quorum     int
}

// driveREST is the REST load generator c.Load names: drive or driveLean.
func (c Config) driveREST() func(ctx context.Context, base, token string, workloads []string, c Config) result {
	if c.Load == LoadLean {
		return driveLean
	}
	return drive
}

// The protocols of Config.Protocol.
const (
	ProtocolREST = "rest"
	ProtocolGRPC = "grpc"
)

// Run seeds a backlog of c.Backlog+c.Tasks pending tasks through the
// engine, serves it, drives it with c.Workers no-op workers until c.Tasks
// lifecycles completed, and writes what it measured to out.
func Run(ctx context.Context, out io.Writer, c Config) error {
	if c.Workers < 1 || c.Tasks < c.Workers || c.Backlog < 0 || c.Batch < 1 || c.Batch > engine.MaxClaimTasks {
		return fmt.Errorf("need --workers ≥ 1, --tasks ≥ --workers, --backlog ≥ 0 and --batch 1-%d", engine.MaxClaimTasks)
	}
	switch c.Protocol {
	case "", ProtocolREST:
	case ProtocolGRPC:
		if c.Batch != 1 {
			return fmt.Errorf("--protocol grpc has no batch form (Worker.Poll leases one task): use --batch 1")
		}
	default:
		return fmt.Errorf("--protocol %q: use rest or grpc", c.Protocol)
	}
	switch c.Load {
	case "", LoadClient:
	case LoadLean:
		if c.Protocol == ProtocolGRPC {
			return fmt.Errorf("--load lean drives REST only: leave it out with --protocol grpc")
		}
	default:
		return fmt.Errorf("--load %q: use client or lean", c.Load)
	}
	if (len(c.WorkerTokens) > 0 || c.JobWorkers != "" || c.Quorum > 0) && (c.Coordinator == "" || c.Load == LoadLean || c.Protocol == ProtocolGRPC || c.Accounts > 0) {
		return fmt.Errorf("--worker-tokens, --job-workers and --quorum drive one job on a coordinator of another process (--coordinator) with the client load generator over REST")
	}
	if c.Version != "" && (c.Coordinator == "" || c.Protocol == ProtocolGRPC) {
		return fmt.Errorf("--workload-version drives a coordinator of another process (--coordinator) over REST")
	}
	if c.Accounts > 0 && (c.Coordinator == "" || c.Protocol == ProtocolGRPC || c.JobsPerAccount < 1) {
		return fmt.Errorf("--accounts drives a coordinator of another process over REST (--coordinator), with --jobs-per-account ≥ 1")
	}
	if c.Coordinator != "" {
		_, err := runRemote(ctx, out, c)
		return err
	}
	if c.Protocol == ProtocolGRPC {
		return fmt.Errorf("--protocol grpc drives a coordinator of its own process: start `scimesh serve` and pass --coordinator URL")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, cleanup, err := database(ctx, c.DB)
	if err != nil {
		return err
	}
	defer cleanup()
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", Shard: "s0", DB: url, Migrate: true, Logger: c.Logger})
	if err != nil {
		return err
	}
	defer srv.Close()

	seedStart := time.Now()
	jobID, err := seedBacklog(ctx, srv.Engine(), c.Backlog+c.Tasks)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "store %s: seeded %d pending tasks in %v\n", storeKind(url), c.Backlog+c.Tasks, time.Since(seedStart).Round(time.Millisecond))

	waitServer := srv.Start(ctx)
	defer func() { cancel(); _ = waitServer() }()
	base := srv.URL()

	stop, err := startProfile(c.Profile)
	if err != nil {
		return err
	}
	if c.CreateChunks > 0 {
		err := create(ctx, out, base, c)
		stop()
		return err
	}
	res := c.driveREST()(ctx, base, "", nil, c)
	stop()
	if res.err != nil {
		return res.err
	}
	cl := client.New(base, "")
	defer cl.CloseIdleConnections()
	job, err := cl.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	report(out, c, res, job.Tasks.Pending)
	return nil
}

// report writes the line docs/PERFORMANCE.md quotes for a run of Run.
func report(out io.Writer, c Config, res result, pending int) {
	claims := res.claims()
	retried := ""
	if res.retried > 0 {
		retried = fmt.Sprintf("; %d requests retried", res.retried)
	}
	fmt.Fprintf(out, "workers %d, batch %d, backlog %d: %d lifecycles in %v = %.0f lifecycles/s; claim p50 %v p99 %v (%d claims); pending after %d%s\n",
		c.Workers, c.Batch, c.Backlog, res.done, res.elapsed.Round(time.Millisecond),
		float64(res.done)/res.elapsed.Seconds(), pct(claims, 50), pct(claims, 99), len(claims), pending, retried)
}

func storeKind(url string) string {
	kind, _, _ := strings.Cut(url, ":")
	return kind
}

// database resolves Config.DB to a database URL and a cleanup.
func database(ctx context.Context, db string) (string, func(), error) {
	switch db {
	case "sqlite":
		dir, err := os.MkdirTemp("", "scimesh-bench-")
		if err != nil {
			return "", nil, err
		}
		return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
	case "postgres":
		cl, err := pgcluster.Start(ctx, pgcluster.Options{})
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
		chunks[i] = domain.ChunkRef{URI: fmt.Sprintf("https://bench.invalid/%d", i), SHA256: fmt.Sprintf("%064x", i)}
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

type result struct {
	done    int64
	retried int // requests sent again, all workers together
	elapsed time.Duration
	// samples are every lifecycle's claim and result requests, in no
	// particular order.
	samples []lifecycle
	err     error
}

// claims are the samples' claim latencies, sorted.
func (r result) claims() []time.Duration {
	d := make([]time.Duration, len(r.samples))
	for i, s := range r.samples {
		d[i] = s.claim
	}
	slices.Sort(d)
	return d
}

// lifecycle is one claim and its result(s), as a worker timed them.
type lifecycle struct {
	end           time.Time     // when the result was answered
	claim, result time.Duration // of the attempts that answered
	tasks         int
	retried       int      // requests sent again after a retryable failure
	jobs          []string // the job of each task, when the run counts shares
}

// errNothing is a claim of a quorum run that found nothing for now.
var errNothing = errors.New("nothing to claim for now")

// noopOutput is every no-op worker's result: a header and one row.
const noopOutput = "id,score\nx,1\n"

// drive runs the workers until c.Tasks lifecycles completed, or until ctx
// is done; a request under way then finishes first. They send token, the
// worker token, and claim tasks of workloads (nil: any).
func drive(ctx context.Context, base, token string, workloads []string, c Config) result {
	// One keep-alive pool for all the workers, two connections each, and
	// no timeout beyond the run's: what the figures have always measured.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Workers * 2}}
	tokens := c.WorkerTokens
	if len(tokens) == 0 {
		tokens = []string{token}
	}
	clients := make([]*client.Client, len(tokens))
	for i, tok := range tokens {
		clients[i] = client.New(base, tok, client.WithTimeout(0), client.WithHTTPClient(hc))
	}
	defer hc.CloseIdleConnections()
	reqCtx := context.WithoutCancel(ctx)
	versions := workloadVersions(workloads, c.Version)
	try := func(f func() error) (time.Duration, int, error) { return retry(client.IsRetryable, f) }
	return work(ctx, c, func(id string, n int) (lifecycle, error) {
		cl := clients[workerNumber(id)%len(clients)]
		// One task is claimed with the single form, more with the batch
		// form.
		var tasks []client.Task
		claimed, claimRetried, err := try(func() (err error) {
			tasks, err = cl.ClaimMany(reqCtx, client.ClaimRequest{WorkerID: id, Workloads: workloads, WorkloadVersions: versions}, n)
			return err
		})
		// An account's workers find nothing to claim while the votes
		// they started wait for other accounts (engine.maxVoting): work
		// lets the others have the reservation.
		if c.Quorum > 1 && err == nil && len(tasks) == 0 {
			return lifecycle{}, errNothing
		}
		if err != nil {
			return lifecycle{}, err
		}
		if len(tasks) == 0 {
			return lifecycle{}, fmt.Errorf("claim found nothing with tasks left; the backlog ran out")
		}
		hold(ctx, c.TaskTime)
		var took time.Duration
		var retried int
		if c.Batch == 1 {
			t := tasks[0]
			if took, retried, err = try(func() error {
				_, err := cl.Complete(reqCtx, t.TaskID, client.Result{WorkerID: id, Attempt: t.Attempt, Output: noopOutput, WorkloadVersion: c.Version})
				return err
			}); err != nil {
				return lifecycle{}, err
			}
		} else {
			items := make([]client.Result, len(tasks))
			for i, t := range tasks {
				items[i] = client.Result{TaskID: t.TaskID, WorkerID: id, Attempt: t.Attempt, Output: noopOutput, WorkloadVersion: c.Version}
			}
			var statuses []client.ResultStatus
			took, retried, err = try(func() (err error) {
				statuses, err = cl.CompleteMany(reqCtx, items)
				return err
			})
			if err != nil {
				return lifecycle{}, err
			}
			for _, s := range statuses {
				if s.Status != http.StatusOK {
					return lifecycle{}, fmt.Errorf("result item: status %d", s.Status)
				}
			}
		}
		l := lifecycle{end: time.Now(), claim: claimed, result: took, tasks: len(tasks), retried: claimRetried + retried}
		if c.Accounts > 0 {
			for _, t := range tasks {
				l.jobs = append(l.jobs, t.JobID)
			}
		}
		return l, nil
	})
}

// hold waits d, as a worker running its task would, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// workerNumber is w of the worker ID work gives worker w.
func workerNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "bench-"))
	return n
}

// work runs c.Workers workers, named bench-N, each taking turns (cycle)
// of up to c.Batch tasks, until c.Tasks lifecycles completed, a turn
// failed, or ctx is done; a turn under way then finishes first. A turn
// that found nothing for now (errNothing) gives its reservation back,
// and so does one that claimed fewer than it reserved; a worker with
// nothing left to reserve waits while other turns are under way, which
// may give some back.
func work(ctx context.Context, c Config, cycle func(id string, n int) (lifecycle, error)) result {
	var (
		remaining, done, retried atomic.Int64
		open                     atomic.Int64 // reserved by a cycle under way
		failed                   atomic.Bool
		mu                       sync.Mutex
		samples                  []lifecycle
		firstErr                 error
		wg                       sync.WaitGroup
	)
	remaining.Store(int64(c.Tasks))
	start := time.Now()
	for w := range c.Workers {
		wg.Go(func() {
			id := fmt.Sprintf("bench-%d", w)
			var mine []lifecycle
			var err error
			for ctx.Err() == nil && err == nil && !failed.Load() {
				n := reserve(&remaining, int64(c.Batch))
				if n == 0 {
					if open.Load() == 0 {
						break
					}
					hold(ctx, time.Millisecond) // what a cycle under way may give back
					continue
				}
				open.Add(n)
				var l lifecycle
				l, err = cycle(id, int(n))
				nothing := errors.Is(err, errNothing) // others may take what this worker may not
				if nothing {
					err = nil
				}
				if err == nil {
					remaining.Add(n - int64(l.tasks)) // what the claim did not fill goes back
				}
				open.Add(-n)
				if nothing {
					hold(ctx, time.Millisecond)
				} else if err == nil {
					mine = append(mine, l)
					done.Add(int64(l.tasks))
					retried.Add(int64(l.retried))
				}
			}
			if err != nil {
				failed.Store(true) // the others stop too, rather than wait for what it held
			}
			mu.Lock()
			defer mu.Unlock()
			samples = append(samples, mine...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	return result{done: done.Load(), retried: int(retried.Load()), elapsed: time.Since(start), samples: samples, err: firstErr}
}

// retry calls f until it succeeds, fails for good, or failed retryably
// (retryable: a 503 or a lost connection over REST, Unavailable over
// gRPC) five times, as a worker would: on a loaded machine the server cuts
// a request short now and then. A result (or Done) sent again for the same
// attempt is applied once; a claim whose answer was lost leaves its task
// leased to nobody until its lease ends, which the count of pending tasks
// after the run shows.
// It returns how long the last attempt took (so that a latency figure
// leaves out the failed attempts and the pauses between them) and how
// many attempts were retried.
func retry(retryable func(error) bool, f func() error) (last time.Duration, retried int, err error) {
	for i := range 5 {
		start := time.Now()
		err = f()
		last = time.Since(start)
		if err == nil || !retryable(err) {
			return last, i, err
		}
		time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
	}
	return last, 4, err
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

// pct is the p-th percentile of sorted, rounded to 10 µs; 0 when empty.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted) - 1) * p / 100
	return sorted[i].Round(10 * time.Microsecond)
}

// last is the largest of sorted, rounded to 10 µs; 0 when empty.
func last(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1].Round(10 * time.Microsecond)
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

// workloadVersions is what the workers of workloads announce in their
// claims when they run version: nil when version is "".
func workloadVersions(workloads []string, version string) map[string]string {
	if version == "" {
		return nil
	}
	m := make(map[string]string, len(workloads))
	for _, w := range workloads {
		m[w] = version
	}
	return m
}
