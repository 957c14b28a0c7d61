package engine

import (
	"context"
	"encoding/json"
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
	wg.Go(func() { e.loop(ctx, "session pruner", time.Hour, nil, e.PruneSessions) })
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
	// NotifyWork tells every listener that work became claimable; payload
	// says what.
	NotifyWork(ctx context.Context, payload string) error
	// ListenWork calls fn with the payload whenever some process
	// notifies, this one included, until ctx is done or the connection
	// fails.
	ListenWork(ctx context.Context, fn func(payload string)) error
}

// workNote is a notification's payload, as JSON: n tasks (-1: an unknown
// number) of kind and workload ("" for several) became runnable in the
// process that sent it, which names itself by a random token.
type workNote struct {
	From     string          `json:"from"`
	Kind     domain.TaskKind `json:"kind"`
	Workload string          `json:"workload,omitempty"`
	N        int             `json:"n"`
}

// workNotes collects the work made runnable in this process since the last
// notification was sent, by kind and workload.
type workNotes struct {
	mu  sync.Mutex
	due map[workNote]int // keys have From and N unset
}

func (w *workNotes) add(kind domain.TaskKind, workload string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := workNote{Kind: kind, Workload: workload}
	if n < 0 || w.due[k] < 0 {
		w.due[k] = -1
		return
	}
	w.due[k] += n
}

func (w *workNotes) take() map[workNote]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := w.due
	w.due = map[workNote]int{}
	return due
}

// notifyWork wakes the long-polling claims of this process that n new
// runnable tasks of kind and workload ("" for several) can feed, and asks
// relayWork to tell the other processes, whose claims it wakes as well:
// only as many as the work can feed.
func (e *Engine) notifyWork(kind domain.TaskKind, workload string, n int) {
	e.workEpoch.Add(1)
	e.claimers.wake(kind, workload, n)
	if !e.relays {
		return // no other process to tell
	}
	e.notes.add(kind, workload, n)
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
			e.keys.clear() // what another process changed while this one was not listening
			err := sig.ListenWork(ctx, e.wakeFor)
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
			for k, n := range e.notes.take() {
				k.From, k.N = e.self, n
				b, _ := json.Marshal(k) // plain strings and an int always encode
				if err := sig.NotifyWork(ctx, string(b)); err != nil && ctx.Err() == nil {
					e.log.Warn("telling other processes about work failed", "error", err)
				}
			}
		}
	}
}

// wakeFor wakes the long-polling claims of this process that the work
// another process notified of can feed; its own notifications, whose
// claims it woke as it made the work, are passed over. A payload it cannot
// read (from another version) wakes every claim.
func (e *Engine) wakeFor(payload string) {
	var n workNote
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.From == "" {
		e.keys.clear()
		e.workEpoch.Add(1)
		e.claimers.wake("", "", -1)
		return
	}
	if n.From == e.self {
		return
	}
	if n.Kind == authNote {
		e.keys.clear()
		return
	}
	e.workEpoch.Add(1)
	e.claimers.wake(n.Kind, n.Workload, n.N)
}

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
