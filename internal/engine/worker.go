package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Worker bookkeeping: which workers called lately and what they hold, for
// the dashboard. Recording a call (seen) is on a worker's path, at most
// every seenEvery per worker and process; PruneWorkers forgets those gone.

// seenEvery bounds how often one process records that a worker called.
const seenEvery = 5 * time.Second

// seenLog remembers when this process last recorded each worker.
type seenLog struct {
	mu   sync.Mutex
	last map[string]seenAt
}

type seenAt struct{ call, beat time.Time }

// seen records that worker called (a claim or poll; with heartbeat, a lease
// renewal), unless this process did so recently. A failure to record is
// logged and otherwise ignored: it costs the dashboard a little freshness.
func (e *Engine) seen(ctx context.Context, worker string, heartbeat bool) {
	now := e.now()
	e.seenLog.mu.Lock()
	s := e.seenLog.last[worker]
	due := now.Sub(s.call) >= seenEvery || (heartbeat && now.Sub(s.beat) >= seenEvery)
	if due {
		if len(e.seenLog.last) >= 10_000 {
			clear(e.seenLog.last)
		}
		s.call = now
		if heartbeat {
			s.beat = now
		}
		e.seenLog.last[worker] = s
	}
	e.seenLog.mu.Unlock()
	if !due {
		return
	}
	err := e.store.WorkerUpsert(ctx, &store.WorkerUpsertParams{ID: worker, Now: now, Heartbeat: heartbeat})
	if err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "recording a worker's call failed", "worker_id", worker, "error", err)
	}
}

// WorkerView is a worker and the tasks it holds leases on.
type WorkerView struct {
	*store.Worker
	Tasks []*domain.Task // leased, soonest expiry first
}

// maxLeasedShown bounds the leases ListWorkers reads.
const maxLeasedShown = 2000

// ListWorkers returns the workers seen within the last d, most recent first,
// each with the tasks it holds now (of the first maxLeasedShown leases).
func (e *Engine) ListWorkers(ctx context.Context, d time.Duration, limit int) ([]*WorkerView, error) {
	ws, err := e.store.WorkerList(ctx, &store.WorkerListParams{Since: e.now().Add(-d), Limit: limit})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list workers: %w", err))
	}
	// Every lease expires before the end of time: this lists them all.
	leased, err := e.store.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Limit: maxLeasedShown})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list leases: %w", err))
	}
	byOwner := map[string][]*domain.Task{}
	for _, t := range leased {
		byOwner[t.LeaseOwner] = append(byOwner[t.LeaseOwner], t)
	}
	out := make([]*WorkerView, len(ws))
	for i, w := range ws {
		out[i] = &WorkerView{Worker: w, Tasks: byOwner[w.ID]}
	}
	return out, nil
}

// workersKept is how long a worker that stopped calling stays listed.
const workersKept = 7 * 24 * time.Hour

// PruneWorkers forgets the workers not seen for workersKept and returns
// how many it forgot.
func (e *Engine) PruneWorkers(ctx context.Context) (int, error) {
	n, err := e.store.WorkerDelete(ctx, e.now().Add(-workersKept))
	return n, mapStoreErr(err)
}
