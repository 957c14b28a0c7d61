package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/scimesh/scimesh/internal/client"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
)

// Tree tasks: a workload gets the task's resolved arguments as a JSON array
// on stdin and prints its result as JSON on stdout. They are polled through
// the Worker service (Config.Trees) by slots of their own (Config.TreeSlots),
// for the workloads that have a command; the built-ins score tables and run
// no tree task.

// maxTreeResult bounds a tree task's result.
const maxTreeResult = 64 << 20

// treeSlot polls tree tasks and runs them, one at a time, until claimCtx is
// done.
func (w *Worker) treeSlot(claimCtx, runCtx context.Context, stop context.CancelCauseFunc) {
	b := backoff{min: w.cfg.MinBackoff, max: w.cfg.MaxBackoff}
	req := &v1.PollRequest{WorkerId: w.cfg.ID, Workloads: w.treeNames, WaitSeconds: int32(w.cfg.ClaimWait.Seconds())}
	for claimCtx.Err() == nil {
		wait, ok := w.ending.claimWindow(w.cfg.ClaimWait)
		if !ok {
			return
		}
		req.WaitSeconds = int32(wait.Seconds())
		began := time.Now()
		res, err := w.cfg.Trees.Poll(claimCtx, connect.NewRequest(req))
		switch {
		case err != nil && claimCtx.Err() != nil:
			return
		case refusedForGood(err):
			stop(&fatalError{fmt.Errorf("the coordinator refuses this worker's tree polls: %w (check --coordinator and --token, or SCIMESH_COORDINATOR and SCIMESH_TOKEN)", err)})
			return
		case err != nil:
			d := b.next()
			w.log.Warn("poll for tree tasks failed; backing off", "error", err, "retry_in", d.Round(time.Millisecond))
			w.pause(claimCtx, d)
		case res.Msg.TaskId == "":
			if time.Since(began) < wait/2 {
				w.pause(claimCtx, b.next())
			}
		default:
			b.reset()
			w.ending.sawLease(res.Msg.LeaseExpiresAt.AsTime())
			w.running.Add(1)
			w.runTree(runCtx, res.Msg)
			w.running.Add(-1)
		}
	}
}

// refusedForGood reports whether a Worker service error is one that
// waiting does not fix: a wrong token, or a request the service rejects.
func refusedForGood(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied, connect.CodeInvalidArgument:
		return err != nil
	}
	return false
}

// runTree runs one attempt of a tree task and reports its outcome, unless
// its lease was lost meanwhile.
func (w *Worker) runTree(runCtx context.Context, t *v1.Task) {
	log := w.log.With("task_id", t.TaskId, "attempt", t.Attempt, "workload", t.Workload)
	ctx, abandon := context.WithCancelCause(runCtx)
	defer abandon(nil)
	end := t.LeaseExpiresAt.AsTime()
	lease := &leaseClock{Lease: client.Lease{ExpiresAt: end, Deadline: end}}
	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() { heartbeat(ctx, abandon, w.treeRenew(t), lease, nil, stop, log) })
	result, err := w.execTree(ctx, t, log)
	close(stop)
	beats.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, errAbandoned) {
		log.Warn("tree task abandoned: its lease is gone", "error", cause)
		return
	}
	tr := &v1.TaskStateTransition{TaskId: t.TaskId, WorkerId: w.cfg.ID, Attempt: t.Attempt}
	switch {
	case err != nil:
		tr.Error, tr.Retryable = "worker "+w.cfg.ID+": "+err.Error(), true
	default:
		tr.Success, tr.Result = true, result
	}
	reportCtx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 30*time.Second)
	defer cancel()
	if _, err := w.cfg.Trees.Done(reportCtx, connect.NewRequest(tr)); err != nil {
		log.Error("tree task outcome not recorded; it runs again once its lease runs out", "error", err)
		return
	}
	log.Info("tree task done", "success", tr.Success, "error", tr.Error)
}

// treeRenew renews a tree task's lease through the Worker service. Its
// answer carries no deadline: a renewal moves the lease's end on by the
// lease's length, as first granted.
func (w *Worker) treeRenew(t *v1.Task) renewFunc {
	length := time.Until(t.LeaseExpiresAt.AsTime())
	return func(ctx context.Context) (client.Lease, error) {
		asked := time.Now() // the lease's new end is no earlier than this plus length
		_, err := w.cfg.Trees.Keepalive(ctx, connect.NewRequest(&v1.KeepaliveRequest{TaskId: t.TaskId, WorkerId: w.cfg.ID, Attempt: t.Attempt}))
		switch connect.CodeOf(err) {
		case connect.CodeFailedPrecondition, connect.CodeNotFound:
			if err != nil {
				return client.Lease{}, fmt.Errorf("%w: %w", errAbandoned, err)
			}
		}
		end := asked.Add(length)
		return client.Lease{ExpiresAt: end, Deadline: end}, err
	}
}

// execTree runs the workload's command with the arguments on stdin and
// returns its stdout as a JSON value.
func (w *Worker) execTree(ctx context.Context, t *v1.Task, log *slog.Logger) (*structpb.Value, error) {
	wl, ok := w.workloads[t.Workload]
	if !ok || wl.Command == "" {
		return nil, fmt.Errorf("workload %q has no command on this worker", t.Workload)
	}
	args := make([]json.RawMessage, len(t.Args))
	for i, a := range t.Args {
		b, err := protojson.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		args[i] = b
	}
	stdin, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	dir, err := w.attemptDir(t.TaskId, int(t.Attempt))
	if err != nil {
		return nil, err
	}
	defer w.removeAttemptDir(dir, log)
	env := w.commandEnv("SCIMESH_TASK_ID="+t.TaskId, "SCIMESH_ATTEMPT="+strconv.Itoa(int(t.Attempt)),
		"SCIMESH_WORKLOAD="+t.Workload, "SCIMESH_WORKER_ID="+w.cfg.ID)
	// stderr lines go to the task's log as they come, like a chunk
	// command's.
	ship := w.shipLogs(ctx, w.treeLogSink(t), log)
	stderr := &lineWriter{emit: ship.add}
	var stdout bytes.Buffer
	runErr := runShell(ctx, shellSpec{command: wl.Command, dir: dir, env: env, stdin: bytes.NewReader(stdin),
		stdout: &limitedBuffer{buf: &stdout, max: maxTreeResult}, stderr: stderr})
	stderr.flush()
	ship.close()
	if runErr != nil {
		return nil, fmt.Errorf("%w%s", runErr, tailText(stderr.lastLines()))
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal(bytes.TrimSpace(stdout.Bytes()), v); err != nil {
		return nil, fmt.Errorf("the command's stdout is not one JSON value: %v", err)
	}
	return v, nil
}

// treeLogSink sends a tree task attempt's log lines through the Worker
// service, each batch with its offset, so that one sent again after a lost
// answer is stored once.
func (w *Worker) treeLogSink(t *v1.Task) logSink {
	return func(ctx context.Context, b logBatch) error {
		_, err := w.cfg.Trees.Log(ctx, connect.NewRequest(&v1.LogRequest{TaskId: t.TaskId, WorkerId: w.cfg.ID, Attempt: t.Attempt, Lines: b.lines, Offset: &b.offset}))
		switch connect.CodeOf(err) {
		case connect.CodeNotFound, connect.CodeFailedPrecondition, connect.CodeUnimplemented:
			return fmt.Errorf("%w: %w", errLogGone, err)
		case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeUnknown:
			if err != nil {
				return fmt.Errorf("%w: %w", errLogLater, err)
			}
		}
		return err
	}
}

// limitedBuffer keeps at most max bytes and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// runShell runs a command to its end; see shellSpec.
func runShell(ctx context.Context, s shellSpec) error {
	sh, err := startShell(ctx, s)
	if err != nil {
		return fmt.Errorf("start the command: %w", err)
	}
	return sh.wait()
}
