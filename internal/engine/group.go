package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
)

// group commit: concurrent calls of one operation (claims, results,
// heartbeats, tree results) are served together, one statement or
// transaction for many callers, as a database commits the transactions
// that queue behind a flush in one. There is no timer: a call that finds
// no run of its operation in flight runs at once, alone, so an idle
// server adds no latency. Calls that arrive while one is in flight queue;
// when it ends, it takes the queued calls from the front, in order of
// arrival, up to a total weight of max (a call weighs what it asks for: a
// batch claim of 50 tasks weighs 50; one heavier than max goes alone),
// and hands them to the first of them, which runs them as one. The busier
// the server, the larger the runs, and the fewer statements per call.
// (One run in flight makes the largest runs; two made fewer lifecycles a
// second on both stores, bench/NOTES.md.)
//
// A run's function sees the callers' inputs in order and returns one
// output per input, in the same order: each caller gets its own answer,
// never another's. A run outlives a caller that gives up (its context
// ends) once it has been taken into the run; a caller that gives up while
// queued leaves the queue and is not run.
type group[In, Out any] struct {
	run func(ctx context.Context, in []In) []Out
	max int // the weight of the calls of a run

	mu      sync.Mutex
	running bool
	queue   []*groupCall[In, Out]
}

type groupCall[In, Out any] struct {
	in     In
	weight int
	out    Out
	panic  any                        // what the run panicked with, if it did
	done   chan struct{}              // closed once out (or panic) is set
	lead   chan []*groupCall[In, Out] // the run this call is to lead
}

func newGroup[In, Out any](max int, run func(ctx context.Context, in []In) []Out) *group[In, Out] {
	return &group[In, Out]{run: run, max: max}
}

// do runs in, of the given weight, alone or with the calls queued beside
// it, and returns its output; an error only when ctx ended while the call
// was queued.
func (g *group[In, Out]) do(ctx context.Context, in In, weight int) (Out, error) {
	c := &groupCall[In, Out]{in: in, weight: weight, done: make(chan struct{}), lead: make(chan []*groupCall[In, Out], 1)}
	g.mu.Lock()
	if !g.running { // then nothing is queued: queued calls are handed on at the end of a run
		g.running = true
		g.mu.Unlock()
		g.lead(ctx, []*groupCall[In, Out]{c})
		return c.result()
	}
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	select {
	case run := <-c.lead:
		g.lead(ctx, run)
		return c.result()
	case <-c.done:
		return c.result()
	case <-ctx.Done():
	}
	g.mu.Lock()
	for i, q := range g.queue {
		if q == c {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			g.mu.Unlock()
			var zero Out
			return zero, ctx.Err()
		}
	}
	g.mu.Unlock()
	// Taken into a run already: the others wait on it.
	select {
	case run := <-c.lead:
		g.lead(ctx, run)
	case <-c.done:
	}
	return c.result()
}

// result is the call's output, or the run's panic again, in the caller's
// goroutine.
func (c *groupCall[In, Out]) result() (Out, error) {
	if c.panic != nil {
		panic(c.panic)
	}
	return c.out, nil
}

// lead runs the calls of run (the caller's first), answers them, then
// hands what queued meanwhile on. A panic of the run is every caller's.
func (g *group[In, Out]) lead(ctx context.Context, run []*groupCall[In, Out]) {
	in := make([]In, len(run))
	for i, c := range run {
		in[i] = c.in
	}
	defer g.handOn()
	defer func() {
		p := recover()
		for _, c := range run {
			if p != nil {
				c.panic = p
			}
			close(c.done)
		}
	}()
	out := g.run(context.WithoutCancel(ctx), in)
	for i, c := range run {
		c.out = out[i]
	}
}

// handOn hands the calls queued during a run to the first of them, or
// ends the running when there are none.
func (g *group[In, Out]) handOn() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	n, w := 1, g.queue[0].weight
	for n < len(g.queue) && w+g.queue[n].weight <= g.max {
		w += g.queue[n].weight
		n++
	}
	next := make([]*groupCall[In, Out], n)
	copy(next, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	g.mu.Unlock()
	next[0].lead <- next
}

// groups are groups by key, for an operation whose calls can share a run
// only when they agree on something (claims: the kind and workloads). A
// key's group lives while calls of it are made.
type groups[In, Out any] struct {
	new func() *group[In, Out]

	mu sync.Mutex
	m  map[string]*keyedGroup[In, Out]
}

type keyedGroup[In, Out any] struct {
	*group[In, Out]
	users int
}

func newGroups[In, Out any](max int, run func(ctx context.Context, in []In) []Out) *groups[In, Out] {
	return &groups[In, Out]{
		new: func() *group[In, Out] { return newGroup(max, run) },
		m:   map[string]*keyedGroup[In, Out]{},
	}
}

// do is group.do in the group of key.
func (gs *groups[In, Out]) do(ctx context.Context, key string, in In, weight int) (Out, error) {
	gs.mu.Lock()
	g := gs.m[key]
	if g == nil {
		g = &keyedGroup[In, Out]{group: gs.new()}
		gs.m[key] = g
	}
	g.users++
	gs.mu.Unlock()
	defer func() {
		gs.mu.Lock()
		if g.users--; g.users == 0 {
			delete(gs.m, key)
		}
		gs.mu.Unlock()
	}()
	return g.do(ctx, in, weight)
}

// orAlone runs together over items as one transaction, and returns its
// outputs. When the transaction failed as a whole (together's error) for
// a reason other than the database being unavailable, it runs each item
// alone instead, so that one that cannot be written fails alone and
// takes none of the others with it.
func orAlone[In, Out any](items []In, together func([]In) ([]Out, error)) []Out {
	out, err := together(items)
	if err == nil || len(items) == 1 || errors.Is(err, domain.ErrUnavailable) {
		return out
	}
	for i := range items {
		one, _ := together(items[i : i+1])
		out[i] = one[0]
	}
	return out
}
