package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/table"
)

// errAbandoned is the cause of an attempt stopped because its lease is gone:
// the coordinator answered lease_lost or cancelled, or no heartbeat got
// through before the lease ran out. Nothing is reported for it.
var errAbandoned = errors.New("the lease is gone")

// outputError is an output of a workload that the worker cannot use.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// leaseClock is an attempt's lease, moved on by heartbeats.
type leaseClock struct {
	mu sync.Mutex
	client.Lease
}

// get returns the lease's end on the local clock.
func (l *leaseClock) get() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Deadline
}

// set records a renewal and reports whether it moved the lease's end on.
func (l *leaseClock) set(next client.Lease) (moved bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	moved = next.ExpiresAt.After(l.ExpiresAt)
	l.Lease = next
	return moved
}

// outcome is what a successful attempt sends.
type outcome struct {
	output []byte
	rows   int // data rows the workload wrote
	kept   int // rows in output
	input  int64
}

// handle runs a claimed task to its end: heartbeats while it runs, then
// reports the result or the failure — or nothing, when the lease is gone.
// runCtx is done when the worker kills its tasks at the end of the grace
// period.
func (w *Worker) handle(runCtx context.Context, t *client.Task, procs *slotProcs) {
	w.running.Add(1)
	defer w.running.Add(-1)
	log := w.log.With("task_id", t.TaskID, "job_id", t.JobID, "attempt", t.Attempt)
	began := time.Now()
	log.Info("task claimed", "workload", t.Workload, "chunk_index", t.ChunkIndex,
		"lease_left", time.Until(t.LeaseDeadline).Round(time.Millisecond))

	lease := &leaseClock{Lease: t.Lease()}
	ctx, abandon := context.WithCancelCause(runCtx)
	defer abandon(nil)
	var atEnd func(time.Time)
	if t.TimeoutSeconds > 0 {
		// The attempt times out after TimeoutSeconds of its own, or at
		// the end of a lease the coordinator will not move on, whichever
		// comes first. The coordinator counts from the claim, which was
		// before the answer got here, and never renews a lease past the
		// attempt's deadline: once a renewal leaves the end where it was,
		// that end is the deadline, and the worker stops the attempt
		// itself rather than find its lease gone.
		var timeOut context.CancelCauseFunc
		ctx, timeOut = context.WithCancelCause(ctx)
		limit := time.Duration(t.TimeoutSeconds) * time.Second
		timer := time.AfterFunc(limit, func() { timeOut(&timeoutError{t.TimeoutSeconds}) })
		defer timer.Stop()
		atEnd = func(deadline time.Time) {
			if deadline.Before(began.Add(limit)) {
				timer.Reset(max(time.Until(deadline), 0))
			}
		}
	}
	stopBeats := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() { heartbeat(ctx, abandon, w.restRenew(t), lease, atEnd, stopBeats, log) })
	out, err := w.execute(ctx, t, procs, log)
	close(stopBeats)
	beats.Wait()

	var timedOut *timeoutError
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errAbandoned):
		log.Warn("task stopped without a report: its lease is gone", "reason", cause)
	case err == nil:
		w.complete(runCtx, t, lease, out, time.Since(began), log)
	case runCtx.Err() != nil:
		w.fail(runCtx, t, lease, w.releaseReason(context.Cause(runCtx)), release, log)
	case errors.As(cause, &timedOut):
		// The contract's wording comes first, so that the error reads
		// the same whether the worker or the coordinator stopped it.
		w.fail(runCtx, t, lease, fmt.Sprintf("%v: worker %s killed the attempt and every process it started", timedOut, w.cfg.ID), retry, log)
	default:
		var hidden *hiddenError
		if errors.As(err, &hidden) {
			log.Warn("the hosted input failed; the task's error gives the reason alone", "input", redactRaw(t.Input.URL), "reason", hidden.reason, "error", hidden.err)
		}
		w.fail(runCtx, t, lease, w.says(err.Error()), retryIf(!errors.Is(err, ErrPermanent)), log)
	}
}

// timeoutError is the cause of an attempt stopped because it ran longer
// than its job's timeout_seconds.
type timeoutError struct{ seconds int }

func (e *timeoutError) Error() string { return fmt.Sprintf("timed out after %d s", e.seconds) }

// says attributes a failure's message to this worker.
func (w *Worker) says(msg string) string { return "worker " + w.cfg.ID + ": " + msg }

// renewFunc renews an attempt's lease and returns it. An error wrapping
// errAbandoned means the lease is over for good.
type renewFunc func(ctx context.Context) (client.Lease, error)

// restRenew renews a chunk task's lease through the REST API.
func (w *Worker) restRenew(t *client.Task) renewFunc {
	return func(ctx context.Context) (client.Lease, error) {
		l, err := w.client.Heartbeat(ctx, t.TaskID, w.cfg.ID, t.Attempt)
		if client.IsLeaseLost(err) || client.IsCancelled(err) || client.IsNotFound(err) {
			return client.Lease{}, fmt.Errorf("%w: %w", errAbandoned, err)
		}
		return l, err
	}
}

// heartbeat renews the lease every third of what is left of it until stop
// is closed or ctx is done. When the lease is gone it abandons the attempt,
// which kills the workload. When a renewal does not move the lease's end
// on, the lease ends at the attempt's deadline: heartbeat then stops and,
// if atEnd is set, tells it that end on the local clock.
func heartbeat(ctx context.Context, abandon context.CancelCauseFunc, renew renewFunc, lease *leaseClock, atEnd func(time.Time), stop <-chan struct{}, log *slog.Logger) {
	timer := time.NewTimer(beatWait(lease.get()))
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		deadline := lease.get()
		callCtx, cancel := context.WithTimeout(ctx, min(max(time.Until(deadline), time.Second), 30*time.Second))
		next, err := renew(callCtx)
		cancel()
		switch {
		case err == nil:
			if !lease.set(next) && atEnd != nil {
				atEnd(next.Deadline)
				return
			}
			timer.Reset(beatWait(next.Deadline))
		case ctx.Err() != nil:
			return
		case errors.Is(err, errAbandoned):
			abandon(err)
			return
		case !time.Now().Before(deadline):
			abandon(fmt.Errorf("%w: no heartbeat got through before the lease ran out; the last error: %w", errAbandoned, err))
			return
		default:
			log.Warn("heartbeat failed; retrying", "error", err)
			timer.Reset(min(time.Second, beatWait(deadline)))
		}
	}
}

// beatWait is the wait before the next heartbeat of a lease that ends at
// deadline: a third of what is left.
func beatWait(deadline time.Time) time.Duration {
	return max(time.Until(deadline)/3, 100*time.Millisecond)
}

// execute downloads the task's input and runs its workload over it,
// keeping the best rows of the output. An input whose task names a size
// over Config.MaxInputBytes is not downloaded at all. Its errors are
// worded for the task's error field; those wrapping ErrPermanent are not
// retryable.
func (w *Worker) execute(ctx context.Context, t *client.Task, procs *slotProcs, log *slog.Logger) (*outcome, error) {
	wl, ok := w.workloads[t.Workload]
	if !ok {
		return nil, fmt.Errorf("this worker has no workload %q configured (it runs %v), yet was handed its task", t.Workload, w.names)
	}
	keep, err := table.NewTopK(t.ScoreColumn, domain.Order(t.Order), t.TopK)
	if err != nil {
		return nil, Permanent(fmt.Errorf("the task's settings: %w", err))
	}

	if t.Input.Bytes > w.cfg.MaxInputBytes {
		return nil, Permanent(fmt.Errorf("the input is %d bytes, more than the %d this worker downloads for a chunk (--max-input-bytes): split the data into smaller chunks, or ask the worker's operator to raise the bound", t.Input.Bytes, w.cfg.MaxInputBytes))
	}
	dlCtx, dlCancel := context.WithCancelCause(ctx)
	defer dlCancel(nil)
	hosted := w.hosted(t)
	body, err := w.openInput(dlCtx, t)
	if err != nil {
		if hosted {
			err = hideFetchError(err)
		}
		return nil, fmt.Errorf("download the input: %w", err)
	}
	defer body.Close()
	in := newVerifier(dlCtx, dlCancel, body, t.Input, hosted, w.cfg.InputIdleTimeout, w.cfg.MaxInputBytes)
	defer in.stop()

	var best *table.Selection
	switch {
	case wl.Persistent:
		best, err = w.runPersistent(ctx, wl, t, in, keep, procs, log)
	case wl.Command != "":
		best, err = w.runCommand(ctx, wl, t, in, keep, log)
	default:
		best, err = runBuiltin(ctx, wl.Run, t, in, keep)
	}
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := best.WriteCSV(&out); err != nil {
		return nil, fmt.Errorf("write the kept rows: %w", err)
	}
	return &outcome{output: out.Bytes(), rows: best.RowsRead, kept: len(best.Rows), input: in.n}, nil
}

// runBuiltin runs a built-in workload in the worker's process over the
// input as it downloads, and returns the best rows of its output, which
// it writes into a pipe that keep reads as it comes: a bad output stops
// the workload at once. The whole input has been read and checked before
// it returns the rows, or fails the task for good.
func runBuiltin(ctx context.Context, run RunFunc, t *client.Task, in *verifier, keep *table.TopK) (*table.Selection, error) {
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	pr, pw := io.Pipe()
	parsed := make(chan error, 1)
	var best *table.Selection // set before parsed is sent
	go func() {
		sel, err := keep.Select(pr)
		if err != nil {
			stopRun(&outputError{err})
			pr.CloseWithError(err)
		}
		best = sel
		parsed <- err
	}()
	runErr := callBuiltin(runCtx, run, t, in, pw)
	stoppedBy := context.Cause(runCtx)
	pw.Close()
	parseErr := <-parsed

	var bad *outputError
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case in.failed() != nil:
		// A broken download explains whatever the workload did with it.
		return nil, in.failed()
	case errors.As(stoppedBy, &bad):
		return nil, fmt.Errorf("the workload's output is unusable: %w", bad.err)
	case runErr != nil:
		if errors.Is(runErr, ErrPermanent) {
			// Fail for good only on the input the task names.
			if err := in.finish(); err != nil {
				return nil, err
			}
		}
		return nil, runErr
	case parseErr != nil:
		return nil, fmt.Errorf("the workload's output is unusable: %w", parseErr)
	}
	if err := in.finish(); err != nil {
		return nil, err
	}
	return best, nil
}

// callBuiltin calls a built-in workload, turning a panic into a retryable
// failure rather than the end of the worker and its other tasks.
func callBuiltin(ctx context.Context, run RunFunc, t *client.Task, in io.Reader, out io.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the built-in workload %q panicked: %v", t.Workload, p)
		}
	}()
	return run(ctx, t, in, out)
}

// complete reports a successful attempt's output.
func (w *Worker) complete(runCtx context.Context, t *client.Task, lease *leaseClock, out *outcome, took time.Duration, log *slog.Logger) {
	metrics := fmt.Appendf(nil, `{"seconds":%.3f,"input_bytes":%d,"output_rows":%d}`, took.Seconds(), out.input, out.rows)
	err := w.report(runCtx, lease, func(ctx context.Context) error {
		_, err := w.client.Complete(ctx, t.TaskID, client.Result{WorkerID: w.cfg.ID, Attempt: t.Attempt, Output: string(out.output),
			Metrics: metrics, WorkloadVersion: w.workloads[t.Workload].Version})
		return err
	})
	var refused *client.Error
	switch {
	case err == nil:
		log.Info("task completed", "rows", out.rows, "kept", out.kept, "duration", took.Round(time.Millisecond))
	case client.IsLeaseLost(err), client.IsCancelled(err):
		log.Warn("result not recorded: the lease is gone", "error", err)
	case errors.As(err, &refused) && refused.Code == client.CodeConflict:
		log.Warn("result not recorded: the task was completed with another result", "error", err)
	case errors.As(err, &refused) && (refused.Status == 400 || refused.Status == 413):
		// The coordinator refuses the output; another worker's command may
		// do better, so the failure is retryable.
		w.fail(runCtx, t, lease, w.says("the coordinator refused the output: "+refused.Message), retry, log)
	default:
		log.Error("result not recorded; the task runs again once its lease runs out", "error", err)
	}
}

// failKind says how a failed attempt is reported.
type failKind int

const (
	permanent failKind = iota // fails the task for good
	retry                     // runs again after a backoff while attempts remain
	release                   // given back at once, the attempt not held against it
)

func retryIf(ok bool) failKind {
	if ok {
		return retry
	}
	return permanent
}

// fail reports a failed attempt with the error msg.
func (w *Worker) fail(runCtx context.Context, t *client.Task, lease *leaseClock, msg string, kind failKind, log *slog.Logger) {
	retryable := kind != permanent
	var state string
	err := w.report(runCtx, lease, func(ctx context.Context) error {
		tk, err := w.client.Fail(ctx, t.TaskID, client.Failure{WorkerID: w.cfg.ID, Attempt: t.Attempt, Error: msg, Retryable: retryable, Release: kind == release})
		if err == nil {
			state = tk.State
		}
		return err
	})
	switch {
	case err == nil:
		log.Warn("task attempt failed", "error", msg, "retryable", retryable, "state", state)
	case client.IsLeaseLost(err), client.IsCancelled(err):
		log.Warn("task attempt failed; not recorded: the lease is gone", "error", msg, "report_error", err)
	default:
		log.Error("task attempt failed; not recorded, so the task runs again once its lease runs out", "error", msg, "report_error", err)
	}
}

// reportWindowAfterKill bounds how long a worker that killed its tasks at
// the end of the grace period keeps trying to report them.
const reportWindowAfterKill = 10 * time.Second

// report calls send until it succeeds, fails for good, or the lease is
// surely over (a report after that can only be refused), retrying
// errors of the network and 5xx answers with backoff.
func (w *Worker) report(runCtx context.Context, lease *leaseClock, send func(context.Context) error) error {
	deadline := lease.get().Add(2 * time.Second)
	if soon := time.Now().Add(5 * time.Second); deadline.Before(soon) {
		deadline = soon
	}
	b := backoff{min: 250 * time.Millisecond, max: 2 * time.Second}
	for {
		if limit := time.Now().Add(reportWindowAfterKill); runCtx.Err() != nil && limit.Before(deadline) {
			deadline = limit
		}
		ctx, cancel := context.WithDeadline(context.WithoutCancel(runCtx), deadline)
		err := send(ctx)
		cancel()
		if err == nil || !client.IsRetryable(err) {
			return err
		}
		d := b.next()
		if time.Until(deadline) < d {
			return err
		}
		time.Sleep(d)
	}
}
