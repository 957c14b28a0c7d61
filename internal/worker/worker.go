package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// Defaults of Config.
const (
	DefaultClaimWait        = 25 * time.Second
	DefaultGrace            = 30 * time.Second
	DefaultLogInterval      = 500 * time.Millisecond
	DefaultLogBatch         = 100
	DefaultInputIdleTimeout = 2 * time.Minute
	DefaultMinBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
)

// Config is what a Worker runs with. Zero tuning fields take their
// defaults.
type Config struct {
	// Client talks to the coordinator with the worker token. Required.
	Client *client.Client
	// ID is the worker_id sent with every claim and report: 1-128 of
	// [A-Za-z0-9._:-]. Required.
	ID string
	// Concurrency is how many tasks run at once, each in its own slot.
	// Required, at least 1.
	Concurrency int
	// Workloads are the workloads this worker runs; it claims tasks of
	// these names only. Required, names unique.
	Workloads []Workload
	// WorkDir holds the directories WORK_DIR/TASK_ID/ATTEMPT/ that
	// commands run in. Required when a workload has a command.
	WorkDir string
	// KeepWorkDirs keeps each attempt's directory when it ends, for
	// debugging; by default it is removed.
	KeepWorkDirs bool
	// AllowInputHosts are the operator's --allow-input-host patterns:
	// where hosted inputs (a job's input.chunks URIs) may be downloaded
	// from. A pattern is a host name (exact), "*.domain" (any subdomain)
	// or a CIDR ("10.0.0.0/8"; a bare address is one). Without patterns,
	// any host but loopback, link-local and unspecified addresses. Input
	// on the coordinator's own scheme and host is always allowed. See
	// hostPolicy for the rules.
	AllowInputHosts []string
	// MaxInputBytes bounds every input: a task that names a larger size
	// (input.bytes) fails for good before anything is downloaded, and the
	// download of an input whose size the task does not give (input.bytes
	// 0) is cut off past it, failing the task for good too.
	// DefaultMaxInputBytes when 0.
	MaxInputBytes int64
	// PassEnv names variables of the worker's environment that commands
	// see besides PATH, HOME, LANG, LC_*, TZ and TMPDIR.
	PassEnv []string
	// Grace is how long running tasks may go on once Run's context is done,
	// before they are killed and reported as retryable failures. Zero kills
	// them at once; the scimesh command defaults it to DefaultGrace.
	Grace time.Duration
	// Logger receives one line per event; slog.Default() when nil.
	Logger *slog.Logger
	// Deadline, when set, is the end of the worker's allocation
	// (--max-runtime, --until): it claims only while at least a lease is
	// left before it, and at it kills and releases its running tasks and
	// returns from Run. See deadline.go.
	Deadline time.Time

	// TreeSlots is how many tree tasks run at once, each in a slot of its
	// own beside the Concurrency slots of chunk tasks; 0 runs none. Tree
	// tasks are polled through Trees, for the workloads with a command.
	TreeSlots int
	// Trees is the Worker service of the coordinator, with the worker
	// token; required when TreeSlots > 0.
	Trees scimeshv1connect.WorkerClient

	// ClaimWait is how long a claim waits for a task (long polling).
	ClaimWait time.Duration
	// LogInterval and LogBatch say when stderr lines are shipped: every
	// LogInterval, or as soon as LogBatch lines wait.
	LogInterval time.Duration
	LogBatch    int
	// InputIdleTimeout abandons an input download that delivered nothing
	// for that long.
	InputIdleTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait after a claim found no work
	// at once or failed; the wait doubles from one to the other, with
	// jitter.
	MinBackoff, MaxBackoff time.Duration
}

// Worker is SciMesh's worker daemon: it claims tasks of its workloads from a
// coordinator and runs them. See the package documentation for its life
// cycle.
type Worker struct {
	cfg         Config
	client      *client.Client
	log         *slog.Logger
	workloads   map[string]Workload
	names       []string
	treeNames   []string     // workloads with a command started per task, for tree tasks
	hasCommands bool         // some workload runs a command, in the work directory
	fetch       *fetcher     // of hosted inputs
	readers     *sync.Pool   // of *bufio.Reader, for commands' input and output
	running     atomic.Int64 // tasks being handled
	started     atomic.Bool
	ending      *ending // the deadline and Release
}

// New checks cfg and returns a worker ready to Run.
func New(cfg Config) (*Worker, error) {
	if cfg.Client == nil {
		return nil, errors.New("worker: no coordinator client")
	}
	if !domain.ValidWorkerID(cfg.ID) {
		return nil, fmt.Errorf("worker ID %q must be 1-128 characters of A-Z a-z 0-9 . _ : - (set --id)", cfg.ID)
	}
	if cfg.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency is %d; run at least 1 task at a time", cfg.Concurrency)
	}
	if len(cfg.Workloads) == 0 {
		return nil, errors.New("no workload configured: give at least one --workload NAME=COMMAND (or a built-in's NAME)")
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("grace period %v is negative", cfg.Grace)
	}
	w := &Worker{cfg: cfg, client: cfg.Client, log: cfg.Logger, workloads: map[string]Workload{}, readers: newReaderPool(), ending: newEnding(cfg.Deadline)}
	needDir := false
	for _, wl := range cfg.Workloads {
		if !domain.ValidWorkload(wl.Name) {
			return nil, fmt.Errorf("workload name %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", wl.Name)
		}
		if _, dup := w.workloads[wl.Name]; dup {
			return nil, fmt.Errorf("workload %q is configured twice; give each name once", wl.Name)
		}
		if (wl.Command == "") == (wl.Run == nil) {
			return nil, fmt.Errorf("workload %q needs a command or a built-in, not both or neither", wl.Name)
		}
		if wl.Persistent && wl.Command == "" {
			return nil, fmt.Errorf("workload %q is a built-in, which runs inside the worker: only a workload with a command can be persistent", wl.Name)
		}
		if wl.Version == "" {
			v, err := DefaultVersion(wl)
			if err != nil {
				return nil, err
			}
			wl.Version = v
		}
		if !domain.ValidVersion(wl.Version) {
			return nil, fmt.Errorf("the version %q of workload %s must be 1-128 characters of A-Z a-z 0-9 . _ : + -", wl.Version, wl.Name)
		}
		needDir = needDir || wl.Command != ""
		w.workloads[wl.Name] = wl
		w.names = append(w.names, wl.Name)
		if wl.Command != "" && !wl.Persistent { // a tree task's command gets its arguments on stdin, not frames
			w.treeNames = append(w.treeNames, wl.Name)
		}
	}
	switch {
	case cfg.TreeSlots < 0:
		return nil, fmt.Errorf("tree concurrency is %d; give 0 or more", cfg.TreeSlots)
	case cfg.TreeSlots > 0 && cfg.Trees == nil:
		return nil, errors.New("worker: tree slots need the coordinator's Worker service")
	case cfg.TreeSlots > 0 && len(w.treeNames) == 0:
		return nil, errors.New("tree tasks run commands, each started for its task: give a --workload NAME=COMMAND for them that is not --persistent")
	}
	w.hasCommands = needDir
	if needDir {
		if cfg.WorkDir == "" {
			return nil, errors.New("no work directory: commands run in WORK_DIR/TASK_ID/ATTEMPT/ (set --work-dir)")
		}
		abs, err := filepath.Abs(cfg.WorkDir)
		if err != nil {
			return nil, fmt.Errorf("work directory %q: %w", cfg.WorkDir, err)
		}
		w.cfg.WorkDir = abs
	}
	policy, err := parseHostPolicy(cfg.AllowInputHosts)
	if err != nil {
		return nil, err
	}
	w.fetch = newFetcher(policy, "scimesh-worker/"+cfg.ID)
	switch {
	case cfg.MaxInputBytes < 0:
		return nil, fmt.Errorf("max input bytes is %d; give a positive number of bytes (--max-input-bytes)", cfg.MaxInputBytes)
	case cfg.MaxInputBytes == 0:
		w.cfg.MaxInputBytes = DefaultMaxInputBytes
	}
	for _, name := range cfg.PassEnv {
		if err := checkEnvName(name); err != nil {
			return nil, err
		}
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.log = w.log.With("worker_id", cfg.ID)
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&w.cfg.ClaimWait, DefaultClaimWait)
	def(&w.cfg.LogInterval, DefaultLogInterval)
	def(&w.cfg.InputIdleTimeout, DefaultInputIdleTimeout)
	def(&w.cfg.MinBackoff, DefaultMinBackoff)
	def(&w.cfg.MaxBackoff, DefaultMaxBackoff)
	if w.cfg.LogBatch <= 0 {
		w.cfg.LogBatch = DefaultLogBatch
	}
	w.cfg.ClaimWait = min(w.cfg.ClaimWait, 60*time.Second)
	w.cfg.MaxBackoff = max(w.cfg.MaxBackoff, w.cfg.MinBackoff)
	return w, nil
}

// fatalError stops the worker: the coordinator refuses its claims for a
// reason that waiting does not fix (a wrong token, say).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

// Run claims and runs tasks until ctx is done, then shuts down: it stops
// claiming, lets running tasks finish within the grace period, kills those
// still running and reports them as retryable failures, so that the
// coordinator leases them again at once. It returns nil after such a
// shutdown, and an error when the coordinator refuses the worker's claims
// for good (an unknown token, say), after the same shutdown, or when the
// work directory is unusable, before it claims anything. With a Deadline
// it also ends at that moment, or as soon as no slot will claim again
// before it and nothing runs; at the deadline, and when Release is called,
// it kills its running tasks at once, without a grace period, and releases
// them. On Linux, Run first marks the process not dumpable (see
// hideFromUser), so that the commands it runs cannot read its
// environment or memory. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	if err := hideFromUser(); err != nil {
		w.log.Warn("cannot mark the worker's process not dumpable: other processes of its user, commands included, may read its environment and memory", "error", err)
	}
	claimCtx, stopClaims := context.WithCancelCause(ctx)
	defer stopClaims(nil)
	runCtx, kill := context.WithCancelCause(context.WithoutCancel(ctx))
	defer kill(nil)

	defer w.fetch.close()
	if w.hasCommands { // workloads with a command, which need it
		release, err := w.openWorkDir()
		if err != nil {
			return err
		}
		defer release()
	}
	w.log.Info("worker started", "coordinator", w.client.BaseURL(), "workloads", w.names, "concurrency", w.cfg.Concurrency)
	if !w.cfg.Deadline.IsZero() {
		w.log.Info("claims stop when less than a lease is left before the deadline; running tasks are released at it",
			"deadline", w.cfg.Deadline.UTC().Format(time.RFC3339), "left", time.Until(w.cfg.Deadline).Round(time.Second))
	}
	atDeadline, stopTimer := w.ending.timer()
	defer stopTimer()
	var slots sync.WaitGroup
	for i := range w.cfg.Concurrency {
		slots.Go(func() { w.slot(i, claimCtx, runCtx, stopClaims) })
	}
	for range w.cfg.TreeSlots {
		slots.Go(func() { w.treeSlot(claimCtx, runCtx, stopClaims) })
	}
	done := make(chan struct{})
	go func() {
		slots.Wait()
		close(done)
	}()

	// Why claims end, once: it sets the grace period, and whether running
	// tasks are released or failed when killed.
	var cause error
	select {
	case <-claimCtx.Done(): // the caller's context, or a refusal for good
		cause = context.Cause(claimCtx)
	case <-done: // no slot claims any more before the deadline, and nothing runs
		cause = errNoLeaseLeft
	case <-atDeadline:
		cause = errDeadline
	case <-w.ending.release:
		cause = errReleased
	}
	stopClaims(cause)
	grace, killCause := w.cfg.Grace, errGraceOver
	if killsAtOnce(cause) {
		grace, killCause = 0, cause
	}
	w.log.Info("shutting down: no more claims", "running", w.running.Load(), "grace", grace, "reason", cause.Error())
	graceOver := time.NewTimer(grace)
	defer graceOver.Stop()
	killNow := func(cause error) {
		if n := w.running.Load(); n > 0 {
			w.log.Warn("killing the running tasks", "running", n, "reason", cause)
		}
		kill(cause)
		<-done
	}
	select {
	case <-done:
	case <-graceOver.C:
		killNow(killCause)
	case <-atDeadline: // during the grace period
		killNow(errDeadline)
	case <-w.ending.release:
		killNow(errReleased)
	}
	// Claims' own cause, not the select's: a slot that stopped claims for
	// good (a refused token) also closed done, and the select may have
	// taken that.
	var fatal *fatalError
	if errors.As(context.Cause(claimCtx), &fatal) {
		w.log.Error("worker stopped", "error", fatal.err)
		return fatal.err
	}
	w.log.Info("worker stopped")
	return nil
}

// slot claims one task at a time and runs it, until claimCtx is done;
// its persistent processes (slot number n's) end with it.
func (w *Worker) slot(n int, claimCtx, runCtx context.Context, stop context.CancelCauseFunc) {
	procs := w.newSlotProcs(n)
	defer procs.close()
	b := backoff{min: w.cfg.MinBackoff, max: w.cfg.MaxBackoff}
	versions := make(map[string]string, len(w.names))
	for _, name := range w.names {
		versions[name] = w.workloads[name].Version
	}
	req := client.ClaimRequest{WorkerID: w.cfg.ID, Workloads: w.names, WorkloadVersions: versions, WaitSeconds: w.cfg.ClaimWait.Seconds()}
	for claimCtx.Err() == nil {
		wait, ok := w.ending.claimWindow(w.cfg.ClaimWait)
		if !ok {
			if !w.ending.released() { // Run says so after a Release
				w.log.Info("no more claims: less than a lease is left before the deadline", "left", time.Until(w.cfg.Deadline).Round(time.Millisecond))
			}
			return
		}
		req.WaitSeconds = wait.Seconds()
		began := time.Now()
		t, err := w.client.Claim(claimCtx, req)
		switch {
		case err != nil && claimCtx.Err() != nil:
			return
		case err != nil && client.IsRetryable(err):
			d := b.next()
			w.log.Warn("claim failed; backing off", "error", err, "retry_in", d.Round(time.Millisecond))
			w.pause(claimCtx, d)
		case err != nil:
			stop(&fatalError{fmt.Errorf("the coordinator refuses this worker's claims: %w (check --coordinator and --token, or SCIMESH_COORDINATOR and SCIMESH_TOKEN)", err)})
			return
		case t == nil:
			// No work. A coordinator that held the claim for its wait
			// gets the next at once (with a little jitter); one that
			// answered at once gets growing pauses.
			if time.Since(began) < wait/2 {
				w.pause(claimCtx, b.next())
			} else {
				b.reset()
				w.pause(claimCtx, rand.N(w.cfg.MinBackoff/2+1))
			}
		default:
			b.reset()
			w.ending.sawLease(t.LeaseDeadline)
			w.handle(runCtx, t, procs)
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// backoff yields waits that double from min to max, each scaled by a
// random factor in [0.5, 1] so that workers do not retry in step.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }
