package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Run runs the background loops — the lease reaper, the stitcher, the
// retention pass when configured and, with peers, the outbox — until ctx
// is done. It is safe to run in every process sharing a database.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { e.loop(ctx, "reaper", e.cfg.ReapInterval, nil, e.ExpireLeases) })
	wg.Go(func() { e.loop(ctx, "worker pruner", time.Hour, nil, e.PruneWorkers) })
	wg.Go(func() { e.loop(ctx, "abandoned job sweeper", CreationStale/2, nil, e.DeleteAbandonedJobs) })
	wg.Go(func() { e.loop(ctx, "stitcher", e.cfg.StitchInterval, e.stitch, e.StitchReadyJobs) })
	if e.cfg.RetentionInterval > 0 {
		wg.Go(func() { e.retentionLoop(ctx) })
	}
	if e.cfg.Peers != nil {
		wg.Go(func() { e.loop(ctx, "outbox", e.cfg.OutboxInterval, e.outbox, e.DeliverOutbox) })
	}
	if sig, ok := e.store.(workSignal); ok {
		wg.Go(func() { e.relayWork(ctx, sig) })
	}
	wg.Wait()
}

// workSignal is implemented by stores that can tell the other processes
// sharing their database that work became claimable (PostgreSQL's
// LISTEN/NOTIFY), so that replicas' long-polling claims wake at once
// instead of at their next poll.
type workSignal interface {
	// NotifyWork tells every listener that work became claimable.
	NotifyWork(ctx context.Context) error
	// ListenWork calls fn whenever some process notifies, until ctx is
	// done or the connection fails.
	ListenWork(ctx context.Context, fn func()) error
}

// notifyWork wakes the long-polling claims of this process that n new
// runnable tasks of kind and workload ("" for several) can feed, and asks
// relayWork to tell the other processes.
func (e *Engine) notifyWork(kind domain.TaskKind, workload string, n int) {
	e.claimers.wake(kind, workload, n)
	select {
	case e.outgoing <- struct{}{}:
	default: // a notification is already on its way; it covers this one
	}
}

// relayWork sends this process's work notifications to the other
// processes and wakes this process's claims on theirs, until ctx is done.
// Notifications are hints: claims also poll, so a lost one costs latency.
func (e *Engine) relayWork(ctx context.Context, sig workSignal) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			err := sig.ListenWork(ctx, e.wakeAll)
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("listening for other processes' work failed; retrying", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.outgoing:
			if err := sig.NotifyWork(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("telling other processes about work failed", "error", err)
			}
		}
	}
}

// wakeAll wakes every long-polling claim of this process: another process
// made work of unknown kind and amount claimable.
func (e *Engine) wakeAll() { e.claimers.wake("", "", -1) }

// loop calls fn every interval, and whenever b is notified, until ctx is done.
func (e *Engine) loop(ctx context.Context, name string, interval time.Duration, b *broadcast, fn func(context.Context) (int, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var woken <-chan struct{}
		if b != nil {
			woken = b.Wait()
		}
		if _, err := fn(ctx); err != nil && ctx.Err() == nil {
			e.log.Error(name+" pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-woken:
		}
	}
}

// workersKept is how long a worker that stopped calling stays listed.
const workersKept = 7 * 24 * time.Hour

// PruneWorkers forgets the workers not seen for workersKept and returns
// how many it forgot.
func (e *Engine) PruneWorkers(ctx context.Context) (int, error) {
	n, err := e.store.WorkerDelete(ctx, e.now().Add(-workersKept))
	return n, mapStoreErr(err)
}

// reapBatch bounds the expired leases handled per pass.
const reapBatch = 500

// sweepEvery rate-limits the expiry sweep that runs before claims.
const sweepEvery = 100 * time.Millisecond

func (e *Engine) sweepBeforeClaim(ctx context.Context) {
	e.sweepMu.Lock()
	if time.Since(e.lastSweep) < sweepEvery {
		e.sweepMu.Unlock()
		return
	}
	e.lastSweep = time.Now()
	e.sweepMu.Unlock()
	if _, err := e.ExpireLeases(ctx); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "expiry sweep before claim failed", "error", err)
	}
}

// ExpireLeases ends every lease expired by now: its task goes back to
// pending while attempts remain, else fails with its job. A lease that ran
// out because its attempt reached its deadline (the job's timeout_seconds;
// a lease never outlasts it) is a timed-out attempt: a retryable failure,
// retried after the usual backoff. It returns how many leases it ended.
func (e *Engine) ExpireLeases(ctx context.Context) (int, error) {
	n := 0
	for {
		expired, err := e.store.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: e.now(), Limit: reapBatch})
		if err != nil {
			return n, mapStoreErr(fmt.Errorf("list expired leases: %w", err))
		}
		for _, c := range expired {
			ok, err := e.expire(ctx, c.ID)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
		if len(expired) < reapBatch {
			return n, nil
		}
	}
}

func (e *Engine) expire(ctx context.Context, id string) (bool, error) {
	var ended *domain.Task
	var owner string
	var timedOut bool
	err := e.tx(ctx, func(q store.Querier) error {
		ended, timedOut = nil, false
		t, err := q.TaskGet(ctx, id)
		if err != nil {
			return err
		}
		now := e.now()
		if t.State != domain.TaskLeased || now.Before(t.LeaseExpiresAt) {
			return nil // renewed, completed or already expired by another process
		}
		owner = t.LeaseOwner
		ended = t
		reason := fmt.Sprintf("lease of attempt %d expired: worker %q stopped heartbeating", t.Attempt, t.LeaseOwner)
		if t.Kind == domain.KindStitch {
			reason = fmt.Sprintf("stitch lease of attempt %d expired: coordinator %q stopped", t.Attempt, t.LeaseOwner)
		}
		var final bool
		timedOut, final = domain.ExpireLease(t, reason, domain.Backoff(t.Attempt, e.cfg.Jitter()), now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		if final {
			return e.failJob(ctx, q, t, now)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expire lease of task %s: %w", id, err)
	}
	if ended == nil {
		return false, nil
	}
	if timedOut {
		e.cfg.Observer.Failed(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "task attempt timed out", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State, "error", ended.Error)
	} else {
		e.cfg.Observer.Expired(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "lease expired", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State)
	}
	if ended.State == domain.TaskPending && !ended.RunAfter.After(e.now()) {
		if ended.Kind == domain.KindStitch {
			e.stitch.Notify()
		} else {
			e.notifyWork(ended.Kind, ended.Workload, 1)
		}
	}
	return true, nil
}
