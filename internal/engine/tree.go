package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Task trees. A tree's tasks share the root's ID in JobID (the tree's ID),
// on every shard, which lets one statement cancel a tree's tasks on a
// shard. A task waits until every upstream completed; each result becomes
// the downstream's argument in the same transaction that completes the
// upstream when both are on one shard, or through the outbox (outbox.go)
// when they are not. Either way a result is never lost nor applied twice.

// PlacedTask is a tree task with its real ID, to be created on the shard
// of that ID, with every setting resolved.
type PlacedTask struct {
	ID           string `json:"id"`
	TreeID       string `json:"tree_id"` // the root's real ID
	DownstreamID string `json:"downstream_id,omitempty"`
	Workload     string `json:"workload"`
	// Owner is the account that submitted the tree; empty in messages
	// of shards older than accounts, which means the admin.
	Owner string `json:"owner,omitempty"`
	// Args are JSON values, or references (Ref) to the real IDs of the
	// upstreams whose results they become.
	Args         []domain.TreeArg `json:"args,omitempty"`
	MaxAttempts  int              `json:"max_attempts"`
	LeaseSeconds int              `json:"lease_seconds"`
	Priority     int              `json:"priority"`
	// Position is the task's place in the tree, root first: claims
	// prefer lower positions within a tree.
	Position int `json:"position"`
	// TreeCreatedAt is when the tree was submitted: claims prefer older
	// trees at equal priority.
	TreeCreatedAt time.Time `json:"tree_created_at"`
}

// row returns p as a new task and its arguments.
func (p *PlacedTask) row(now time.Time) (*domain.Task, []domain.TaskArg) {
	t := &domain.Task{
		ID: p.ID, JobID: p.TreeID, Kind: domain.KindTree, Workload: p.Workload, ChunkIndex: p.Position, Owner: p.Owner,
		State: domain.TaskPending, MaxAttempts: p.MaxAttempts, LeaseSeconds: p.LeaseSeconds, Priority: p.Priority,
		RunAfter: now, JobCreatedAt: p.TreeCreatedAt, DownstreamID: p.DownstreamID, CreatedAt: now, UpdatedAt: now,
	}
	args := make([]domain.TaskArg, len(p.Args))
	for i, a := range p.Args {
		args[i] = domain.TaskArg{TaskID: p.ID, Position: i, Value: a.Value, UpstreamID: a.Ref}
		if a.Ref != "" {
			t.PendingUpstreams++
		}
	}
	if t.PendingUpstreams > 0 {
		t.State = domain.TaskWaiting
	}
	return t, args
}

// SubmitTree validates spec and creates its tasks from the root to the
// leaves: those on this shard in one transaction, which also records, for
// each other shard of the tree, a message creating its tasks there. It
// tries to deliver those messages before it returns; the ones it cannot
// deliver, to a shard that is down, the outbox loop delivers later. It
// returns the real ID of each placeholder and the root's. known says which
// shards exist; without Peers only this one does.
func (e *Engine) SubmitTree(ctx context.Context, spec *domain.TreeSpec, known func(string) bool) (map[string]string, string, error) {
	if e.cfg.Peers == nil { // no way to reach another shard
		known = func(s string) bool { return s == e.cfg.Shard }
	}
	plan, err := spec.Plan(known)
	if err != nil {
		return nil, "", err
	}
	now := e.now()
	local := e.newLocalID()
	ids := make([]string, len(spec.Tasks))
	for pos, i := range plan.Order {
		ids[i] = plan.Shards[i] + ":" + local
		if i != plan.Root {
			ids[i] += "-t" + strconv.Itoa(pos)
		}
	}
	rootID := ids[plan.Root]
	var tasks []*domain.Task
	var args []domain.TaskArg
	var msgs []*store.OutboxMessage // one per other shard, in the order of their first task
	remote := map[string]*Message{}
	var shards []string
	for pos, i := range plan.Order {
		ts := spec.Tasks[i]
		p := PlacedTask{
			ID: ids[i], TreeID: rootID, Workload: ts.Workload, MaxAttempts: ts.MaxAttempts,
			LeaseSeconds: ts.LeaseSeconds, Priority: ts.Priority, Position: pos, TreeCreatedAt: now,
			Owner: domain.CallerOf(ctx).Account,
		}
		if p.MaxAttempts == 0 {
			p.MaxAttempts = domain.DefaultMaxAttempts
		}
		if p.LeaseSeconds == 0 {
			p.LeaseSeconds = domain.DefaultLeaseSeconds
		}
		if d := plan.Downstream[i]; d >= 0 {
			p.DownstreamID = ids[d]
		}
		up := 0
		for _, a := range ts.Args {
			if a.Ref != "" {
				p.Args = append(p.Args, domain.TreeArg{Ref: ids[plan.Upstreams[i][up]]})
				up++
			} else {
				p.Args = append(p.Args, domain.TreeArg{Value: a.Value})
			}
		}
		if s := plan.Shards[i]; s != e.cfg.Shard {
			if remote[s] == nil {
				remote[s] = &Message{Kind: MsgSubmitTask}
				shards = append(shards, s)
			}
			remote[s].Tasks = append(remote[s].Tasks, p)
			continue
		}
		t, a := p.row(now)
		tasks = append(tasks, t)
		args = append(args, a...)
	}
	for _, s := range shards {
		// Claimed by this call until outboxLease passes: it delivers them
		// itself below, and the outbox loop only if it cannot.
		m, err := e.outboxMessage(remote[s], now.Add(outboxLease))
		if err != nil {
			return nil, "", err
		}
		msgs = append(msgs, m)
	}
	err = e.tx(ctx, func(q store.Querier) error {
		if err := q.TaskInsert(ctx, tasks); err != nil {
			return err
		}
		if err := q.TaskArgInsert(ctx, args); err != nil {
			return err
		}
		return q.OutboxInsert(ctx, msgs)
	})
	if err != nil {
		return nil, "", fmt.Errorf("submit tree: %w", err)
	}
	if len(tasks) > 0 {
		e.notifyWork(domain.KindTree, "", len(tasks))
	}
	delivered := 0
	for _, m := range msgs { // one shard after the other, the root's first
		delivered += e.deliver(ctx, []*store.OutboxMessage{m})
	}
	byPlaceholder := make(map[string]string, len(ids))
	for i, ts := range spec.Tasks {
		byPlaceholder[ts.ID] = ids[i]
	}
	e.log.InfoContext(ctx, "tree submitted", "root_id", rootID, "tasks", len(spec.Tasks), "local_tasks", len(tasks),
		"shards", len(shards)+min(len(tasks), 1), "shards_pending", len(msgs)-delivered)
	return byPlaceholder, rootID, nil
}

// TreeTask is a leased tree task with its arguments resolved.
type TreeTask struct {
	*domain.Task
	Args []json.RawMessage
}

// PollTree leases one runnable tree task of the given workloads (any when
// empty), waiting up to wait; nil when there is none.
func (e *Engine) PollTree(ctx context.Context, worker string, workloads []string, wait time.Duration) (*TreeTask, error) {
	views, err := e.ClaimTasks(ctx, ClaimTasksParams{WorkerID: worker, Workloads: workloads, Max: 1, Wait: wait, kind: domain.KindTree})
	if err != nil || len(views) == 0 {
		return nil, err
	}
	return &TreeTask{Task: views[0].Task, Args: views[0].Args}, nil
}

// CompleteTree records a tree task's JSON result for the live lease
// (worker, attempt) and, in the same transaction, hands it to the
// downstream task, which becomes runnable once all its upstreams completed:
// directly when the downstream is on this shard, else by an outbox message
// (ReportSuccess). Replaying the recorded result changes nothing. Results
// that arrive together are written in one transaction (see group), each
// judged as it would be alone.
func (e *Engine) CompleteTree(ctx context.Context, taskID, worker string, attempt int, result json.RawMessage) error {
	if err := domain.CheckLeaseRequest(worker, attempt); err != nil {
		return err
	}
	worker = domain.PrincipalOf(ctx).LeaseOwner(worker)
	var compact bytes.Buffer
	if err := json.Compact(&compact, result); err != nil {
		return domain.Invalidf("the result of task %s must be JSON: %v", taskID, err)
	}
	// Compacted, so that a replay compares equal whatever its spacing.
	err, gerr := e.treeDones.do(ctx, treeDone{taskID: taskID, worker: worker, attempt: attempt, result: compact.Bytes()}, 1)
	if gerr != nil {
		return gerr
	}
	return err
}

// treeDone is one tree task's result waiting to share a transaction.
type treeDone struct {
	taskID, worker string
	attempt        int
	result         json.RawMessage
}

// treeDoneRun records tree results that arrived together in one
// transaction, in order. A failure that belongs to one item (no such task,
// a lost lease, a conflicting result) is that item's (see orAlone for a
// transaction that fails as a whole).
func (e *Engine) treeDoneRun(ctx context.Context, items []treeDone) []error {
	return orAlone(items, func(items []treeDone) ([]error, error) { return e.completeTrees(ctx, items) })
}

// completeTrees is treeDoneRun's one transaction, and its error when it
// failed as a whole (every item then carries it).
func (e *Engine) completeTrees(ctx context.Context, items []treeDone) ([]error, error) {
	out := make([]error, len(items))
	leases := make([]leaseRef, len(items))
	for i, c := range items {
		leases[i] = leaseRef{task: c.taskID, worker: c.worker, attempt: c.attempt}
	}
	runnable, completed := 0, 0
	var changed []*domain.Task
	runs := 0
	err := e.tx(ctx, func(q store.Querier) error {
		runs++
		runnable, completed = 0, 0
		changed = changed[:0]
		now := e.now()
		tasks, err := e.leaseTasks(ctx, q, leases, now, runs)
		if err != nil {
			return err
		}
		for i, c := range items {
			out[i] = nil
			t := tasks[c.taskID] // shared by the items of one task: each sees those before it
			if t == nil {
				out[i] = fmt.Errorf("task %q does not exist: %w", c.taskID, domain.ErrNotFound)
				continue
			}
			if t.Kind != domain.KindTree {
				out[i] = fmt.Errorf("task %s is not a tree task; report it through the REST API: %w", c.taskID, domain.ErrInvalidArgument)
				continue
			}
			outcome, err := domain.Complete(t, c.worker, c.attempt, c.result, nil, now)
			if err != nil {
				out[i] = err
				continue
			}
			if outcome == domain.Replayed {
				continue
			}
			charge(q, t, now)
			workerDid(q, c.worker, now)
			changed = append(changed, t) // its Result is the item's
			completed++
		}
		// The results first: a task whose snapshot was stale fails here
		// as stale, before its downstream hears of it.
		if err := q.TaskUpdateMany(ctx, changed); err != nil {
			return err
		}
		for _, t := range changed {
			switch {
			case t.DownstreamID == "":
			case !e.local(t.DownstreamID):
				if err := e.send(ctx, q, &Message{Kind: MsgReportSuccess, TaskID: t.DownstreamID, UpstreamID: t.ID, Result: t.Result}); err != nil {
					return err
				}
			default:
				ok, err := e.handOver(ctx, q, t.DownstreamID, t.ID, t.Result)
				if err != nil {
					return err
				}
				if ok {
					runnable++
				}
			}
		}
		return nil
	})
	if err != nil {
		for i, c := range items {
			out[i] = fmt.Errorf("complete task %s: %w", c.taskID, err)
		}
		return out, err
	}
	e.held.forget(changed...)
	for i, c := range items {
		if out[i] != nil {
			out[i] = fmt.Errorf("complete task %s: %w", c.taskID, out[i])
		}
	}
	if runnable > 0 {
		e.notifyWork(domain.KindTree, "", runnable)
	}
	if completed > 0 {
		e.cfg.Observer.Completed(domain.KindTree, completed)
	}
	return out, nil
}

// ListTreeArgs returns the upstream IDs of a tree task, in argument order.
func (e *Engine) ListTreeArgs(ctx context.Context, taskID string) ([]string, error) {
	args, err := e.store.TaskArgList(ctx, taskID)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	var ups []string
	for _, a := range args {
		if a.UpstreamID != "" {
			ups = append(ups, a.UpstreamID)
		}
	}
	return ups, nil
}
