package engine

import (
	"context"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Bounds of what an engine remembers (see held). Of the leases it handed
// out: heldMax tasks, each of at most heldBytes in its strings and bytes
// (a task takes about 470 bytes more, its fixed fields), so about 24 MiB
// at the most; a task with more (a long error of an earlier attempt, a
// long input URL) is read. Of the chunks being voted on: votesMax, each
// of at most votesBytes in its strings, bytes and ballots (a vote of two
// takes about 1,000), so about 10 MiB; a vote with more (long results,
// ballots added after disagreement) is read.
const (
	heldMax    = 16384
	heldBytes  = 1024
	votesMax   = 4096
	votesBytes = 2048
)

// held remembers the tasks this engine leased, each as its last write here
// left it (the claim, then its heartbeats here), so that a heartbeat or a
// result for a lease it handed out needs no read before its write. A
// snapshot is a guess, never the truth: every write of a task checks the
// version it was read at, so a task written since by anybody else (another
// coordinator, the reaper, a cancel) fails that check, and the transaction
// runs again, reading the task from the database. A snapshot serves only
// the lease it shows, live, and so only calls that write: an answer that
// writes nothing (a stale attempt, a replay, a lost lease) always comes
// from a read.
//
// An engine has a second held, of the chunks being voted on as its last
// write of them left them (row): a ballot's call locks its chunk and
// compares the version, and reads the row only when somebody else wrote
// it since (ballotTx.lock).
type held struct {
	mu         sync.Mutex
	m          map[string]domain.Task
	max, bytes int // bounds: tasks, and the size of one (heldSize)
}

func newHeld(max, bytes int) *held { return &held{m: map[string]domain.Task{}, max: max, bytes: bytes} }

// keep remembers tasks as just claimed. When it is full, the leases
// expired by now are let go, and all of them when that frees less than a
// quarter (so that a full memory of live leases is not swept at every
// lease).
func (h *held) keep(now time.Time, tasks ...*domain.Task) { h.put(now, true, tasks) }

// refresh updates the snapshots of tasks just written here (renewed), and
// adds none: a lease handed out elsewhere is not remembered on the
// strength of a heartbeat, which the next one, sent elsewhere again,
// would make stale.
func (h *held) refresh(tasks ...*domain.Task) { h.put(time.Time{}, false, tasks) }

// put is keep (add) or refresh.
func (h *held) put(now time.Time, add bool, tasks []*domain.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range tasks {
		_, ok := h.m[t.ID]
		switch {
		case !ok && !add:
			continue
		case t.State != domain.TaskLeased || heldSize(t) > h.bytes:
			delete(h.m, t.ID)
			continue
		case !ok && len(h.m) >= h.max:
			for id, s := range h.m {
				if !s.LeaseLive(now) {
					delete(h.m, id)
				}
			}
			if len(h.m) > h.max*3/4 {
				clear(h.m)
			}
		}
		c := *t
		c.Ballots = slices.Clone(t.Ballots) // folded into in place by a later transaction's copy
		h.m[t.ID] = c
	}
}

// size is how many leases h remembers.
func (h *held) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// forget lets go of tasks whose leases ended here.
func (h *held) forget(tasks ...*domain.Task) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range tasks {
		delete(h.m, t.ID)
	}
}

// drop lets go of the snapshots of ids, which a lost race showed stale or
// may have.
func (h *held) drop(ids []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.m, id)
	}
}

// heldSize is what a snapshot of t holds beyond its fixed fields.
func heldSize(t *domain.Task) int {
	n := len(t.ID) + len(t.JobID) + len(t.Kind) + len(t.Workload) + len(t.State) + len(t.LeaseOwner) +
		len(t.InputURI) + len(t.InputSHA256) + len(t.Result) + len(t.Metrics) + len(t.Error) + len(t.DownstreamID) +
		len(t.Voters)
	for _, b := range t.Ballots {
		n += int(unsafe.Sizeof(b)) + len(b.State) + len(b.LeaseOwner) + len(b.Voters) + len(b.Result) + len(b.Metrics) + len(b.Error)
	}
	return n
}

// row returns a copy of the snapshot of the chunk id being voted on, as
// this engine last wrote it, or nil.
func (h *held) row(id string) *domain.Task {
	h.mu.Lock()
	t, ok := h.m[id]
	h.mu.Unlock()
	if !ok || len(t.Ballots) == 0 {
		return nil
	}
	t.Ballots = slices.Clone(t.Ballots)
	return &t
}

// lease returns a copy of the snapshot of task id when it shows the live
// lease of (worker, attempt) at now, and nil otherwise.
func (h *held) lease(id, worker string, attempt int, now time.Time) *domain.Task {
	h.mu.Lock()
	t, ok := h.m[id]
	h.mu.Unlock()
	// A replica's snapshot, kept to count the leases held, is stale once
	// its chunk is written again (its other ballots): it is read.
	if !ok || t.Kind == domain.KindReplica || !t.HoldsLease(worker, attempt, now) {
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
// exist: on a transaction's first run (run 1) from e.held the snapshots
// that show their lease live at now, the others read in q, in one
// statement. A later run, after a lost race, reads every task and lets go
// of their snapshots. A task named twice is looked up by its first lease.
func (e *Engine) leaseTasks(ctx context.Context, q store.Querier, leases []leaseRef, now time.Time, run int) (map[string]*domain.Task, error) {
	m := make(map[string]*domain.Task, len(leases)) // nil until read: what is not found stays nil
	var read []string
	for _, l := range leases {
		if _, ok := m[l.task]; ok {
			continue
		}
		var t *domain.Task
		if run == 1 {
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
	if run > 1 {
		e.held.drop(read)
	}
	if err := getTasks(ctx, q, read, m); err != nil {
		return nil, err
	}
	return m, nil
}

// chunksLeasedBefore returns the chunks of workloads (any when empty)
// leased here before at and live at now, not to worker: the leases a
// backup may be due for (claimBackup), oldest first.
func (h *held) chunksLeasedBefore(at, now time.Time, workloads []string, worker string) []domain.Task {
	h.mu.Lock()
	var out []domain.Task
	for _, t := range h.m {
		if t.Kind == domain.KindChunk && t.LeasedAt.Before(at) && t.LeaseLive(now) && t.LeaseOwner != worker &&
			(len(workloads) == 0 || slices.Contains(workloads, t.Workload)) {
			out = append(out, t)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b domain.Task) int { return a.LeasedAt.Compare(b.LeasedAt) })
	return out
}
