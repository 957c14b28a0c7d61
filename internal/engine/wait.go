package engine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
)

// Defaults of the caps on waiting calls, per process.
const (
	DefaultMaxWaitingClaims = 1000
	DefaultMaxStreams       = 256
)

// claimers are the long-polling claims of this process, waiting in
// arrival order. New work wakes as many of them as it can feed — those
// that asked for its kind and workload, each counted for the tasks it
// claims at once — not all of them; a claim that comes back empty-handed
// polls again within PollInterval anyway.
type claimers struct {
	mu      sync.Mutex
	max     int
	waiting []*claimer
}

// claimer is one waiting claim. woken holds at most one wake-up, so a
// wake that comes while the claim is busy claiming is not lost.
type claimer struct {
	kind      domain.TaskKind
	workloads []string // nil: any
	max       int
	woken     chan struct{}
}

// join adds a claim to the queue, or refuses it with domain.ErrBusy when
// the process already holds its maximum of waiting claims.
func (c *claimers) join(kind domain.TaskKind, workloads []string, max int) (*claimer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) >= c.max {
		return nil, fmt.Errorf("%w: this coordinator already holds its maximum of %d waiting claims; retry shortly, or ask the operator to raise --max-waiting-claims",
			domain.ErrBusy, c.max)
	}
	w := &claimer{kind: kind, workloads: workloads, max: max, woken: make(chan struct{}, 1)}
	c.waiting = append(c.waiting, w)
	return w, nil
}

// leave takes w out of the queue.
func (c *claimers) leave(w *claimer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.waiting, w); i >= 0 {
		c.waiting = slices.Delete(c.waiting, i, i+1)
	}
}

// wake wakes, in arrival order, the claims that n new tasks of kind and
// workload can feed; workload "" matches every claim of the kind. n < 0
// wakes them all: work of unknown kind and amount (another process's).
func (c *claimers) wake(kind domain.TaskKind, workload string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiting {
		if n == 0 {
			return
		}
		if n > 0 && (w.kind != kind || workload != "" && w.workloads != nil && !slices.Contains(w.workloads, workload)) {
			continue
		}
		select {
		case w.woken <- struct{}{}:
		default: // woken already and not yet claiming: it counts again
		}
		if n > 0 {
			n = max(n-w.max, 0)
		}
	}
}

// slots counts open streams (log follows, the dashboard's live views)
// against a cap.
type slots struct {
	mu   sync.Mutex
	max  int
	open int
}

// take holds a slot until release is called, or refuses with
// domain.ErrBusy when all are held.
func (s *slots) take() (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= s.max {
		return nil, fmt.Errorf("%w: this coordinator already holds its maximum of %d open streams; retry shortly, or ask the operator to raise --max-streams",
			domain.ErrBusy, s.max)
	}
	s.open++
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.open--
		s.mu.Unlock()
	}), nil
}

// followers wake the followers of one key at a time: a task's log, or a
// job (WaitJob's).
type followers struct {
	mu    sync.Mutex
	tasks map[string]*broadcast
	count map[string]int
}

func newFollowers() *followers {
	return &followers{tasks: map[string]*broadcast{}, count: map[string]int{}}
}

// watch returns the broadcast of taskID's log, notified at each append,
// and a function to call when the follower is done with it.
func (f *followers) watch(taskID string) (*broadcast, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.tasks[taskID]
	if !ok {
		b = newBroadcast()
		f.tasks[taskID] = b
	}
	f.count[taskID]++
	return b, sync.OnceFunc(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.count[taskID]--; f.count[taskID] == 0 {
			delete(f.count, taskID)
			delete(f.tasks, taskID)
		}
	})
}

// notify wakes the followers of taskID's log.
func (f *followers) notify(taskID string) {
	f.mu.Lock()
	b := f.tasks[taskID]
	f.mu.Unlock()
	if b != nil {
		b.Notify()
	}
}
