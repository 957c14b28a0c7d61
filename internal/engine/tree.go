package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Task trees on one shard. A tree's tasks share the root's ID in JobID (the
// tree's ID), which lets one statement cancel a tree. A task waits until
// every upstream completed; each result becomes the downstream's argument in
// the same transaction that completes the upstream, so a result is never
// lost nor applied twice. Trees whose tasks span shards need the outbox and
// the Internal service, which are not built yet: ErrCrossShard.

// ErrCrossShard reports a tree whose tasks are not all on this shard.
var ErrCrossShard = errors.New("trees whose tasks span shards are not built yet; put every task on this shard")

// SubmitTree validates spec and creates its tasks, all on this shard, in
// one transaction. It returns the real ID of each placeholder and the
// root's. known says which shards exist; a tree on another existing shard
// is ErrCrossShard.
func (e *Engine) SubmitTree(ctx context.Context, spec *domain.TreeSpec, known func(string) bool) (map[string]string, string, error) {
	plan, err := spec.Plan(known)
	if err != nil {
		return nil, "", err
	}
	for i, s := range plan.Shards {
		if s != e.cfg.Shard {
			return nil, "", fmt.Errorf("task %q is on shard %s, this is %s: %w", spec.Tasks[i].ID, s, e.cfg.Shard, ErrCrossShard)
		}
	}
	now := e.now()
	local := e.newLocalID()
	rootID := e.cfg.Shard + ":" + local
	ids := make([]string, len(spec.Tasks))
	for pos, i := range plan.Order {
		ids[i] = rootID
		if i != plan.Root {
			ids[i] = rootID + "-t" + strconv.Itoa(pos)
		}
	}
	tasks := make([]*domain.Task, 0, len(spec.Tasks))
	var args []domain.TaskArg
	for pos, i := range plan.Order {
		ts := spec.Tasks[i]
		t := &domain.Task{
			ID: ids[i], JobID: rootID, Kind: domain.KindTree, Workload: ts.Workload, ChunkIndex: pos,
			State: domain.TaskPending, MaxAttempts: ts.MaxAttempts, LeaseSeconds: ts.LeaseSeconds, Priority: ts.Priority,
			RunAfter: now, JobCreatedAt: now, PendingUpstreams: len(plan.Upstreams[i]), CreatedAt: now, UpdatedAt: now,
		}
		if t.MaxAttempts == 0 {
			t.MaxAttempts = domain.DefaultMaxAttempts
		}
		if t.LeaseSeconds == 0 {
			t.LeaseSeconds = domain.DefaultLeaseSeconds
		}
		if t.PendingUpstreams > 0 {
			t.State = domain.TaskWaiting
		}
		if d := plan.Downstream[i]; d >= 0 {
			t.DownstreamID = ids[d]
		}
		tasks = append(tasks, t)
		for p, a := range ts.Args {
			arg := domain.TaskArg{TaskID: t.ID, Position: p, Value: a.Value}
			if a.Ref != "" {
				arg = domain.TaskArg{TaskID: t.ID, Position: p, UpstreamID: ids[indexOf(spec, a.Ref)]}
			}
			args = append(args, arg)
		}
	}
	err = e.tx(ctx, func(q store.Querier) error {
		if err := q.TaskInsert(ctx, tasks); err != nil {
			return err
		}
		return q.TaskArgInsert(ctx, args)
	})
	if err != nil {
		return nil, "", fmt.Errorf("submit tree: %w", err)
	}
	e.notifyWork()
	byPlaceholder := make(map[string]string, len(ids))
	for i, ts := range spec.Tasks {
		byPlaceholder[ts.ID] = ids[i]
	}
	e.log.InfoContext(ctx, "tree submitted", "root_id", rootID, "tasks", len(tasks))
	return byPlaceholder, rootID, nil
}

func indexOf(spec *domain.TreeSpec, placeholder string) int {
	for i, t := range spec.Tasks {
		if t.ID == placeholder {
			return i
		}
	}
	return -1 // Plan checked every reference
}

// TreeTask is a leased tree task with its arguments resolved.
type TreeTask struct {
	*domain.Task
	Args []json.RawMessage
}

// PollTree leases one runnable tree task of the given workloads (any when
// empty), waiting up to wait; nil when there is none.
func (e *Engine) PollTree(ctx context.Context, worker string, workloads []string, wait time.Duration) (*TreeTask, error) {
	views, err := e.Claim(ctx, ClaimParams{WorkerID: worker, Workloads: workloads, Max: 1, Wait: wait, kind: domain.KindTree})
	if err != nil || len(views) == 0 {
		return nil, err
	}
	t := views[0].Task
	args, err := e.store.TaskArgList(ctx, t.ID)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("arguments of task %s: %w", t.ID, err))
	}
	out := &TreeTask{Task: t, Args: make([]json.RawMessage, len(args))}
	for i, a := range args {
		out.Args[i] = a.Value
	}
	return out, nil
}

// CompleteTree records a tree task's JSON result for the live lease
// (worker, attempt) and, in the same transaction, hands it to the
// downstream task, which becomes runnable once all its upstreams completed.
// Replaying the recorded result changes nothing.
func (e *Engine) CompleteTree(ctx context.Context, taskID, worker string, attempt int, result json.RawMessage) error {
	if err := domain.CheckLeaseRequest(worker, attempt); err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, result); err != nil {
		return domain.Invalidf("the result of task %s must be JSON: %v", taskID, err)
	}
	result = compact.Bytes() // so that a replay compares equal whatever its spacing
	err := e.tx(ctx, func(q store.Querier) error {
		t, err := q.TaskGet(ctx, taskID)
		if err != nil {
			return notFound(err, "task %q", taskID)
		}
		if t.Kind != domain.KindTree {
			return fmt.Errorf("task %s is not a tree task; report it through the REST API: %w", taskID, domain.ErrInvalidArgument)
		}
		outcome, err := domain.Complete(t, worker, attempt, result, nil, e.now())
		if err != nil || outcome == domain.Replayed {
			return err
		}
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		if t.DownstreamID == "" {
			return nil
		}
		set, err := q.TaskArgResolve(ctx, t.DownstreamID, t.ID, result)
		if err != nil || !set {
			return err
		}
		d, err := q.TaskUpstreamDone(ctx, t.DownstreamID, 1, e.now())
		if err == nil && d.State == domain.TaskPending {
			defer e.notifyWork()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("complete task %s: %w", taskID, err)
	}
	return nil
}

// TreeArgs returns the upstream IDs of a tree task, in argument order.
func (e *Engine) TreeArgs(ctx context.Context, taskID string) ([]string, error) {
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
