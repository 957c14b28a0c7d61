package engine

import (
	"context"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Run runs the background loops — the lease reaper, the stitcher, the
// retention pass when configured and, with peers, the outbox — until ctx
// is done. It is safe to run in every process sharing a database.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { e.loop(ctx, "reaper", e.cfg.ReapInterval, nil, e.Sweep) })
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
