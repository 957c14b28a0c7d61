package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// reapBatch bounds the expired leases handled per pass.
const reapBatch = 500

// sweepEvery rate-limits the sweep (expiry, the end of backoffs) that runs
// before claims.
const sweepEvery = 100 * time.Millisecond

// runnableBatch bounds the tasks one MakeRunnable call takes out of
// backoff.
const runnableBatch = 1000

func (e *Engine) sweepBeforeClaim(ctx context.Context) {
	now := e.now() // the engine's clock, which tests move
	e.sweepMu.Lock()
	if d := now.Sub(e.lastSweep); d >= 0 && d < sweepEvery {
		e.sweepMu.Unlock()
		return
	}
	e.lastSweep = now
	e.sweepMu.Unlock()
	if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "sweep before claim failed", "error", err)
	}
}

// Sweep ends expired leases (ExpireLeases), then makes the tasks whose
// backoff passed claimable (MakeRunnable); it returns how many tasks it
// changed. The reaper runs it, and so do claims, at most every
// sweepEvery.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	n, err := e.ExpireLeases(ctx)
	if err != nil {
		return n, err
	}
	m, err := e.MakeRunnable(ctx)
	return n + m, err
}

// MakeRunnable makes the tasks whose backoff passed claimable, and returns
// how many. Claims see a task in backoff only once this has run after its
// backoff passed.
func (e *Engine) MakeRunnable(ctx context.Context) (int, error) {
	n := 0
	for {
		m, err := e.store.TaskMakeRunnable(ctx, &store.TaskMakeRunnableParams{Now: e.now(), Limit: runnableBatch})
		if err != nil {
			return n, mapStoreErr(fmt.Errorf("end backoffs: %w", err))
		}
		n += m
		if m > 0 {
			e.workEpoch.Add(1) // no claimer is woken: they poll
		}
		if m < runnableBatch {
			return n, nil
		}
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

// expiredBallot returns the replica task of a ballot of c, being voted
// on, whose lease expired by now; nil when none did. The reaper finds c
// again while another has.
func expiredBallot(ctx context.Context, q store.Querier, c *domain.Task, now time.Time) (*domain.Task, error) {
	for _, b := range c.Ballots {
		if b.State == domain.TaskLeased && !now.Before(b.LeaseExpiresAt) {
			return q.TaskGet(ctx, domain.ReplicaID(c.ID, b.N))
		}
	}
	return nil, nil
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
		if t.LeaseOwner == domain.QuorumLeaseOwner {
			// Being voted on: its lease ends with its earliest ballot's.
			if t, err = expiredBallot(ctx, q, t, now); t == nil || err != nil {
				return err
			}
		}
		if _, err := e.lockVotes(ctx, q, t); err != nil {
			return err
		}
		owner = t.LeaseOwner
		ended = t
		reason := fmt.Sprintf("lease of attempt %d expired: worker %q stopped heartbeating", t.Attempt, t.LeaseOwner)
		if t.Kind == domain.KindStitch {
			reason = fmt.Sprintf("stitch lease of attempt %d expired: coordinator %q stopped", t.Attempt, t.LeaseOwner)
		}
		charge(q, t, now) // as ended when its lease ran out
		chargeLapsed(q, t, now)
		var final bool
		timedOut, final = domain.ExpireLease(t, reason, domain.Backoff(t.Attempt, e.cfg.Jitter()), now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		if final {
			return e.failedForGood(ctx, q, t, now)
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
	e.held.refresh(ended) // still leased when the task's other attempt goes on
	e.jobChanged(ended)
	if timedOut {
		e.cfg.Observer.Failed(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "task attempt timed out", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State, "error", ended.Error)
	} else {
		e.cfg.Observer.Expired(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "lease expired", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State)
	}
	if ended.Kind == domain.KindReplica {
		e.notifyWork(domain.KindChunk, ended.Workload, domain.MaxQuorum) // the replicas its vote may have added
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
