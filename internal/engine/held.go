package engine

import (
	"context"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// heldMax bounds the leases an engine remembers (see held): a task takes
// some 700 bytes with its strings, so about 22 MiB at the most.
const heldMax = 32768

// held remembers the tasks this engine leased, each as its last write here
// left it, so that a heartbeat or a result for a lease it handed out needs
// no read before its write. A snapshot is a guess, never the truth: every
// write of a task checks the version it was read at, so a task written
// since by anybody else (another coordinator, the reaper, a cancel) fails
// that check, and the transaction runs again, reading the task from the
// database. A snapshot serves only the lease it shows, live, and so only
// calls that write: an answer that writes nothing (a stale attempt, a
// replay, a lost lease) always comes from a read.
type held struct {
	mu sync.Mutex
	m  map[string]domain.Task
}

func newHeld() *held { return &held{m: map[string]domain.Task{}} }

// keep remembers tasks as just written, and forgets those no longer
// leased. When it is full, the leases expired by now are let go, and all
// of them when that frees less than a quarter (so that a full memory of
// live leases is not swept at every lease).
func (h *held) keep(now time.Time, tasks ...*domain.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range tasks {
		if t.State != domain.TaskLeased {
			delete(h.m, t.ID)
			continue
		}
		if _, ok := h.m[t.ID]; !ok && len(h.m) >= heldMax {
			for id, s := range h.m {
				if !s.LeaseLive(now) {
					delete(h.m, id)
				}
			}
			if len(h.m) > heldMax*3/4 {
				clear(h.m)
			}
		}
		h.m[t.ID] = *t
	}
}

// forget lets go of tasks whose leases ended here.
func (h *held) forget(tasks ...*domain.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range tasks {
		delete(h.m, t.ID)
	}
}

// lease returns a copy of the snapshot of task id when it shows the live
// lease of (worker, attempt) at now, and nil otherwise.
func (h *held) lease(id, worker string, attempt int, now time.Time) *domain.Task {
	h.mu.Lock()
	t, ok := h.m[id]
	h.mu.Unlock()
	if !ok || !t.HoldsLease(worker, attempt, now) {
		return nil
	}
	return &t
}

// leaseRef names a lease a call says it holds.
type leaseRef struct {
	task, worker string
	attempt      int
}

// leaseTasks returns the tasks of leases by ID, nil for those that do not
// exist: from e.held the snapshots that show their lease live at now (when
// fromHeld), the others read in q, in one statement. A task named twice is
// looked up by its first lease.
func (e *Engine) leaseTasks(ctx context.Context, q store.Querier, leases []leaseRef, now time.Time, fromHeld bool) (map[string]*domain.Task, error) {
	m := make(map[string]*domain.Task, len(leases))
	var read []string
	for _, l := range leases {
		if _, ok := m[l.task]; ok {
			continue
		}
		var t *domain.Task
		if fromHeld {
			t = e.held.lease(l.task, l.worker, l.attempt, now)
		}
		m[l.task] = t
		if t == nil {
			read = append(read, l.task)
		}
	}
	if len(read) == 0 {
		return m, nil
	}
	got, err := q.TaskGetMany(ctx, read)
	if err != nil {
		return nil, err
	}
	for _, t := range got {
		m[t.ID] = t
	}
	return m, nil
}
