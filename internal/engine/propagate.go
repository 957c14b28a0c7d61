package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// How a tree moves across shards. Each shard knows only its own tasks and
// their neighbours' IDs; what crosses a shard boundary is an outbox message,
// applied by the receiver with one of the methods below, each idempotent:
//
//   - a task that succeeds hands its result to its downstream
//     (MsgReportSuccess → ReportSuccess);
//   - a task that fails for good fails its downstream, and so on up to the
//     root (MsgSetFailed → ReportFailure), and every task on that path
//     cancels its other upstreams (MsgSetCancel → CancelTask), which cancel
//     theirs, down to the leaves.
//
// So once a task fails for good, every task of the tree ends failed (the
// path to the root) or cancelled (the rest): the root fails, and a task is
// cancelled whenever its downstream fails or is cancelled. The shard that
// fails the root takes a shortcut for its own tasks: the whole tree is
// over, so it cancels all of them in one statement and tells only the
// remote upstreams they were waiting for.

// handOver records upstreamID's result as the argument of task taskID of
// this shard and reports whether that made the task runnable. Replaying the
// same result changes nothing; another result from the same upstream is
// ErrConflict.
func (e *Engine) handOver(ctx context.Context, q store.Querier, taskID, upstreamID string, result []byte) (bool, error) {
	set, err := q.TaskArgResolve(ctx, &store.TaskArgResolveParams{TaskID: taskID, UpstreamID: upstreamID, Value: result})
	if err != nil {
		return false, err
	}
	if !set {
		args, err := q.TaskArgList(ctx, taskID)
		if err != nil {
			return false, err
		}
		for _, a := range args {
			if a.UpstreamID != upstreamID {
				continue
			}
			if !bytes.Equal(a.Value, result) {
				return false, fmt.Errorf("task %s already has another result from upstream %s: %w", taskID, upstreamID, domain.ErrConflict)
			}
			return false, nil // a replay
		}
		if _, err := q.TaskGet(ctx, taskID); err != nil {
			return false, notFound(err, "task %q", taskID)
		}
		return false, domain.Invalidf("task %s has no upstream %s", taskID, upstreamID)
	}
	d, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: taskID, N: 1, Now: e.now()})
	if err != nil {
		return false, err
	}
	return d.State == domain.TaskPending, nil
}

// failPath propagates the failure of t, which just failed for good — by
// itself, or because its upstream from failed (from is "" otherwise): it
// fails the path from t to the root and cancels every other task of the
// tree still waiting, pending or leased, on this shard and, through the
// outbox, on the others.
//
// gone names tasks that will never exist (their shard refused to create
// them): nothing is sent to them. It may be nil.
func (e *Engine) failPath(ctx context.Context, q store.Querier, t *domain.Task, from string, gone map[string]bool, now time.Time) error {
	cause := t.Error
	if from == "" {
		cause = "upstream task " + t.ID + " failed: " + t.Error
	}
	type link struct {
		task *domain.Task
		from string // the upstream whose failure failed it
	}
	path := []link{{t, from}}
	var msgs []*Message
	cur := t
	for cur.DownstreamID != "" {
		if !e.local(cur.DownstreamID) {
			if !gone[cur.DownstreamID] { // a gone one's downstream is failed by whoever knows it
				msgs = append(msgs, &Message{Kind: MsgSetFailed, TaskID: cur.DownstreamID, UpstreamID: cur.ID, Error: cause})
			}
			break
		}
		d, err := q.TaskGet(ctx, cur.DownstreamID)
		if err != nil {
			return err
		}
		if d.State.Final() {
			break // failed or cancelled already, by whatever failed it
		}
		failTask(q, d, cause, now)
		if err := q.TaskUpdate(ctx, d); err != nil {
			return err
		}
		path = append(path, link{d, cur.ID})
		cur = d
	}
	reason := "task " + t.ID + " of the tree failed"
	if cur.DownstreamID == "" { // the root failed here: the whole tree is over
		if t.Kind != domain.KindTree {
			if err := cancelJobTasks(ctx, q, domain.KindChunk, &store.TaskCancelJobParams{JobID: t.JobID, Except: t.ID, Now: now}); err != nil {
				return err
			}
			return e.send(ctx, q, msgs...)
		}
		more, err := e.cancelTreeHere(ctx, q, t.JobID, t.ID, from, gone, reason, now)
		if err != nil {
			return err
		}
		return e.send(ctx, q, append(msgs, more...)...)
	}
	for _, l := range path {
		more, err := e.cancelUpstreams(ctx, q, l.task, l.from, gone, reason, now)
		if err != nil {
			return err
		}
		msgs = append(msgs, more...)
	}
	return e.send(ctx, q, msgs...)
}

// cancelTreeHere cancels every task of tree on this shard that is not
// final, but except, and returns the messages cancelling their upstreams
// on other shards that still owe a result, but skip and the gone ones.
func (e *Engine) cancelTreeHere(ctx context.Context, q store.Querier, tree, except, skip string, gone map[string]bool, reason string, now time.Time) ([]*Message, error) {
	open, err := q.TaskArgListRefs(ctx, &store.TaskArgListRefsParams{JobID: tree, Open: true})
	if err != nil {
		return nil, err
	}
	var msgs []*Message
	for _, a := range open {
		if !e.local(a.UpstreamID) && a.UpstreamID != skip && !gone[a.UpstreamID] {
			msgs = append(msgs, &Message{Kind: MsgSetCancel, TaskID: a.UpstreamID, Error: reason})
		}
	}
	if err := cancelJobTasks(ctx, q, domain.KindTree, &store.TaskCancelJobParams{JobID: tree, Except: except, Now: now}); err != nil {
		return nil, err
	}
	return msgs, nil
}

// cancelUpstreams cancels the upstreams of t still waiting for a result,
// but except, and theirs in turn: those on this shard at once, the others
// by the messages it returns.
func (e *Engine) cancelUpstreams(ctx context.Context, q store.Querier, t *domain.Task, except string, gone map[string]bool, reason string, now time.Time) ([]*Message, error) {
	var msgs []*Message
	todo := []string{t.ID}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		args, err := q.TaskArgList(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, a := range args {
			if a.UpstreamID == "" || a.Value != nil || a.UpstreamID == except || gone[a.UpstreamID] {
				continue // a value, a result already in, the failed upstream, or a task that never was
			}
			if !e.local(a.UpstreamID) {
				msgs = append(msgs, &Message{Kind: MsgSetCancel, TaskID: a.UpstreamID, Error: reason})
				continue
			}
			u, err := q.TaskGet(ctx, a.UpstreamID)
			if err != nil {
				return nil, err
			}
			if u.State.Final() {
				continue
			}
			cancelTask(q, u, now)
			if err := q.TaskUpdate(ctx, u); err != nil {
				return nil, err
			}
			todo = append(todo, u.ID)
		}
	}
	return msgs, nil
}

// failTask fails t, which an upstream's failure doomed, with cause, in
// the transaction of q.
func failTask(q store.Querier, t *domain.Task, cause string, now time.Time) {
	endLease(q, t, now)
	t.State, t.Error = domain.TaskFailed, cause
	t.LeaseExpiresAt = time.Time{}
	t.UpdatedAt, t.FinishedAt = now, now
}

// cancelTask cancels t in the transaction of q.
func cancelTask(q store.Querier, t *domain.Task, now time.Time) {
	endLease(q, t, now)
	t.State = domain.TaskCancelled
	t.LeaseExpiresAt = time.Time{}
	t.UpdatedAt, t.FinishedAt = now, now
}

// endLease charges the attempts of t, if t is leased, as ended at now (or
// when their leases ran out, if earlier), in the transaction of q: its
// backup's too, when it has one.
func endLease(q store.Querier, t *domain.Task, now time.Time) {
	if t.State == domain.TaskLeased {
		charge(q, t, now)
		chargeSecond(q, t, now)
	}
}

// cancelJobTasks cancels the tasks of job (or tree) p.JobID that are not
// final, but p.Except, in the transaction of q. Its leased tasks, of
// kind, are read and written one by one, guarded by their versions, so
// that their attempts are charged exactly once: a result that raced the
// cancellation makes the transaction stale and run again. The others go
// in one statement. A claim that commits between the read and that
// statement is cancelled by it without a charge: its lease lasted no time.
func cancelJobTasks(ctx context.Context, q store.Querier, kind domain.TaskKind, p *store.TaskCancelJobParams) error {
	leased, err := q.TaskList(ctx, &store.TaskListParams{JobID: p.JobID, Kind: kind, State: domain.TaskLeased, AfterIndex: -1})
	if err != nil {
		return err
	}
	leased = slices.DeleteFunc(leased, func(t *domain.Task) bool { return t.ID == p.Except })
	for _, t := range leased {
		for _, b := range t.Ballots { // of a chunk being voted on
			if b.State == domain.TaskLeased || b.State == domain.TaskPending {
				r, _ := domain.BallotTask(t, b.N)
				cancelTask(q, r, p.Now)
				domain.FoldBallot(t, r)
			}
		}
		cancelTask(q, t, p.Now)
	}
	if err := q.TaskUpdateMany(ctx, leased); err != nil {
		return err
	}
	_, err = q.TaskCancelJob(ctx, p)
	return err
}

// The receiving side of the outbox: each method applies one kind of message
// from another shard, idempotently. A message about a task this shard does
// not have is ErrNotFound, which the sender retries: its task may still be
// on its way here.

// AcceptTasks creates a tree's tasks on this shard (MsgSubmitTask), all or
// none. Sent again, the same tasks change nothing; other tasks under IDs
// already taken are ErrConflict.
func (e *Engine) AcceptTasks(ctx context.Context, placed []PlacedTask) error {
	if len(placed) == 0 {
		return domain.Invalidf("no tasks to create: send at least one")
	}
	now := e.now()
	tasks := make([]*domain.Task, len(placed))
	var args []domain.TaskArg
	for i := range placed {
		p := &placed[i]
		if err := e.checkPlaced(p); err != nil {
			return err
		}
		p.TreeCreatedAt = p.TreeCreatedAt.UTC().Truncate(time.Microsecond)
		if p.Owner == "" {
			p.Owner = domain.AdminAccount
		}
		var a []domain.TaskArg
		tasks[i], a = p.row(now)
		args = append(args, a...)
	}
	err := e.tx(ctx, func(q store.Querier) error {
		_, err := q.TaskGet(ctx, placed[0].ID)
		if errors.Is(err, store.ErrNotFound) {
			if err := q.TaskInsert(ctx, tasks); err != nil {
				return err
			}
			return q.TaskArgInsert(ctx, args)
		}
		if err != nil {
			return err
		}
		for i := range placed {
			if err := samePlaced(ctx, q, &placed[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create %d tasks of tree %s: %w", len(placed), placed[0].TreeID, err)
	}
	e.notifyWork(domain.KindTree, "", len(placed))
	return nil
}

// checkPlaced validates a task sent by another shard.
func (e *Engine) checkPlaced(p *PlacedTask) error {
	if !e.local(p.ID) {
		// Retried, not refused: the sender's topology may be wrong for now.
		return fmt.Errorf("task %q is not on this shard (%s); check the topology of the shard that sent it: %w",
			p.ID, e.cfg.Shard, domain.ErrNotReady)
	}
	if p.TreeID == "" {
		return domain.Invalidf("task %q has no tree ID", p.ID)
	}
	if p.Owner != "" && !domain.ValidAccountName(p.Owner) {
		return domain.Invalidf("task %q: owner %q is not an account name", p.ID, p.Owner)
	}
	spec := domain.TreeTaskSpec{ID: p.ID, Workload: p.Workload, MaxAttempts: p.MaxAttempts,
		LeaseSeconds: p.LeaseSeconds, Priority: p.Priority}
	if p.MaxAttempts == 0 || p.LeaseSeconds == 0 {
		return domain.Invalidf("task %q: max_attempts and lease_seconds must be set", p.ID)
	}
	spec.Args = p.Args
	return spec.Check()
}

// samePlaced returns nil when the stored task p.ID was created from p,
// else ErrConflict (or ErrNotFound).
func samePlaced(ctx context.Context, q store.Querier, p *PlacedTask) error {
	t, err := q.TaskGet(ctx, p.ID)
	if err != nil {
		return notFound(err, "task %q", p.ID)
	}
	args, err := q.TaskArgList(ctx, p.ID)
	if err != nil {
		return err
	}
	same := t.Kind == domain.KindTree && t.JobID == p.TreeID && t.DownstreamID == p.DownstreamID &&
		t.Workload == p.Workload && t.MaxAttempts == p.MaxAttempts && t.LeaseSeconds == p.LeaseSeconds &&
		t.Priority == p.Priority && t.ChunkIndex == p.Position && t.JobCreatedAt.Equal(p.TreeCreatedAt) && t.Owner == p.Owner &&
		len(args) == len(p.Args)
	for i := 0; same && i < len(args); i++ {
		a, want := args[i], p.Args[i]
		same = a.UpstreamID == want.Ref && (want.Ref != "" || jsonEqual(a.Value, want.Value))
	}
	if !same {
		return fmt.Errorf("task %s exists with other settings: %w", p.ID, domain.ErrConflict)
	}
	return nil
}

// jsonEqual reports whether a and b are the same JSON, whatever their
// spacing.
func jsonEqual(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// ReportSuccess records upstreamID's JSON result as the argument of task
// taskID of this shard (MsgReportSuccess); once every upstream of the task
// has reported, the task becomes runnable. Each upstream counts once.
func (e *Engine) ReportSuccess(ctx context.Context, taskID, upstreamID string, result json.RawMessage) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, result); err != nil {
		return domain.Invalidf("the result of upstream %s must be JSON: %v", upstreamID, err)
	}
	var runnable bool
	err := e.tx(ctx, func(q store.Querier) (err error) {
		runnable, err = e.handOver(ctx, q, taskID, upstreamID, compact.Bytes())
		return err
	})
	if err != nil {
		return fmt.Errorf("report the result of %s to task %s: %w", upstreamID, taskID, err)
	}
	if runnable {
		e.notifyWork(domain.KindTree, "", 1)
	}
	return nil
}

// ReportFailure fails task taskID of this shard because its upstream
// upstreamID failed for good (MsgSetFailed), recording cause as its error,
// and goes on failing the path to the root and cancelling the rest. A task
// already final stays as it is.
func (e *Engine) ReportFailure(ctx context.Context, taskID, upstreamID, cause string) error {
	return e.upstreamFailed(ctx, taskID, upstreamID, cause, nil)
}

func (e *Engine) upstreamFailed(ctx context.Context, taskID, upstreamID, cause string, gone map[string]bool) error {
	err := e.endTreeTask(ctx, taskID, func(q store.Querier, t *domain.Task, now time.Time) error {
		failTask(q, t, cause, now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		return e.failPath(ctx, q, t, upstreamID, gone, now)
	})
	if err != nil {
		return fmt.Errorf("fail task %s after its upstream %s: %w", taskID, upstreamID, err)
	}
	return nil
}

// CancelTask cancels task taskID of this shard, whose downstream failed or
// was cancelled (MsgSetCancel), and its upstreams still running, for
// reason. A task already final stays as it is.
func (e *Engine) CancelTask(ctx context.Context, taskID, reason string) error {
	return e.cancelTree(ctx, taskID, reason, nil)
}

func (e *Engine) cancelTree(ctx context.Context, taskID, reason string, gone map[string]bool) error {
	err := e.endTreeTask(ctx, taskID, func(q store.Querier, t *domain.Task, now time.Time) error {
		cancelTask(q, t, now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		msgs, err := e.cancelUpstreams(ctx, q, t, "", gone, reason, now)
		if err != nil {
			return err
		}
		return e.send(ctx, q, msgs...)
	})
	if err != nil {
		return fmt.Errorf("cancel task %s: %w", taskID, err)
	}
	e.log.InfoContext(ctx, "task cancelled", "task_id", taskID, "reason", reason)
	return nil
}

// endTreeTask runs end on task taskID in a transaction unless the task is
// final already, and wakes the followers of its log.
func (e *Engine) endTreeTask(ctx context.Context, taskID string, end func(q store.Querier, t *domain.Task, now time.Time) error) error {
	err := e.tx(ctx, func(q store.Querier) error {
		t, err := q.TaskGet(ctx, taskID)
		if err != nil {
			return notFound(err, "task %q", taskID)
		}
		if t.Kind != domain.KindTree {
			return domain.Invalidf("task %s is a job's task, not a tree's: only its own shard changes it", taskID)
		}
		if t.State.Final() {
			return nil
		}
		return end(q, t, e.now())
	})
	if err == nil {
		e.followers.notify(taskID)
	}
	return err
}
