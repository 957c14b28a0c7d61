package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// RenewLease renews the live lease held by (worker, attempt) and returns its
// new expiry. Heartbeats that arrive together are written together.
func (e *Engine) RenewLease(ctx context.Context, taskID, worker string, attempt int) (time.Time, error) {
	if err := domain.CheckLeaseRequest(worker, attempt); err != nil {
		return time.Time{}, err
	}
	worker = domain.PrincipalOf(ctx).LeaseOwner(worker)
	a, err := e.renews.do(ctx, renewCall{taskID: taskID, worker: worker, attempt: attempt}, 1)
	if err == nil {
		err = a.err
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	e.seen(ctx, worker, workerCall{heartbeat: true})
	return a.expires, nil
}

// renewCall is one heartbeat; renewAnswer its outcome.
type renewCall struct {
	taskID, worker string
	attempt        int
}

type renewAnswer struct {
	expires time.Time
	err     error
}

// renewRun renews the leases of calls in one transaction, each judged as
// it would be alone, in order (see orAlone).
func (e *Engine) renewRun(ctx context.Context, calls []renewCall) []renewAnswer {
	return orAlone(calls, func(calls []renewCall) ([]renewAnswer, error) { return e.renewLeases(ctx, calls) })
}

// renewLeases is renewRun's one transaction, and its error when it failed
// as a whole (every call then carries it).
func (e *Engine) renewLeases(ctx context.Context, calls []renewCall) ([]renewAnswer, error) {
	out := make([]renewAnswer, len(calls))
	leases := make([]leaseRef, len(calls))
	for i, c := range calls {
		leases[i] = leaseRef{task: c.taskID, worker: c.worker, attempt: c.attempt}
	}
	var changed []*domain.Task
	runs := 0
	err := e.tx(ctx, func(q store.Querier) error {
		runs++
		now := e.now()
		tasks, err := e.leaseTasks(ctx, q, leases, now, runs)
		if err != nil {
			return err
		}
		changed = changed[:0]
		renewed := make(map[string]bool, len(calls)) // a task heartbeated twice is written once
		for i, c := range calls {
			out[i] = renewAnswer{}
			t := tasks[c.taskID]
			if t == nil {
				out[i].err = fmt.Errorf("task %q does not exist: %w", c.taskID, domain.ErrNotFound)
				continue
			}
			domain.Focus(t, c.worker, c.attempt, now)
			if err := domain.CheckLease(t, c.worker, c.attempt, now); err != nil {
				out[i].err = err
				continue
			}
			domain.Renew(t, now)
			out[i].expires = t.LeaseExpiresAt
			if !renewed[t.ID] {
				renewed[t.ID] = true
				changed = append(changed, t)
			}
		}
		return q.TaskUpdateMany(ctx, changed)
	})
	if err != nil {
		for i := range out {
			out[i] = renewAnswer{err: err}
		}
		return out, err
	}
	e.held.refresh(changed...)
	return out, nil
}
