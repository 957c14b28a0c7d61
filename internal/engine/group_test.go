package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// runLog records the runs of a group whose runs block until released.
type runLog struct {
	mu      sync.Mutex
	runs    [][]int
	started chan []int    // each run's inputs, as it starts
	release chan struct{} // one receive per run lets it finish
}

func newRunLog() *runLog {
	return &runLog{started: make(chan []int, 100), release: make(chan struct{}, 100)}
}

func (l *runLog) run(_ context.Context, in []int) []string {
	l.mu.Lock()
	l.runs = append(l.runs, slices.Clone(in))
	l.mu.Unlock()
	l.started <- slices.Clone(in)
	<-l.release
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = fmt.Sprint("answer ", v)
	}
	return out
}

// waitQueued waits until n calls are queued in g.
func waitQueued(t *testing.T, g *group[int, string], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		q := len(g.queue)
		g.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGroupServesQueuedCallsTogether(t *testing.T) {
	t.Parallel()
	l := newRunLog()
	g := newGroup(3, 1, l.run)
	answers := make([]string, 6)
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Go(func() {
			out, err := g.do(t.Context(), i, 1)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			answers[i] = out
		})
	}
	// Idle: the first call runs at once, alone.
	call(0)
	if got := <-l.started; !slices.Equal(got, []int{0}) {
		t.Fatalf("first run = %v, want [0]", got)
	}
	// While it runs, five more queue, in order.
	for i := 1; i <= 5; i++ {
		call(i)
		waitQueued(t, g, i)
	}
	l.release <- struct{}{}
	// The next run takes the first three queued (max 3), then the rest.
	if got := <-l.started; !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("second run = %v, want [1 2 3]", got)
	}
	l.release <- struct{}{}
	if got := <-l.started; !slices.Equal(got, []int{4, 5}) {
		t.Fatalf("third run = %v, want [4 5]", got)
	}
	l.release <- struct{}{}
	wg.Wait()
	for i, a := range answers {
		if want := fmt.Sprint("answer ", i); a != want {
			t.Errorf("call %d got %q, want %q", i, a, want)
		}
	}
	if g.runs != 0 || len(g.queue) != 0 {
		t.Errorf("after the calls: %d runs, %d queued; want none", g.runs, len(g.queue))
	}
}

func TestGroupRunsUpToLimitAtOnce(t *testing.T) {
	t.Parallel()
	l := newRunLog()
	g := newGroup(10, 2, l.run)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { _, _ = g.do(t.Context(), i, 1) })
		if i < 2 {
			<-l.started // two runs in flight, each alone
		} else {
			waitQueued(t, g, 1) // the third waits
		}
	}
	l.release <- struct{}{}
	if got := <-l.started; !slices.Equal(got, []int{2}) {
		t.Fatalf("run after one ended = %v, want [2]", got)
	}
	l.release <- struct{}{}
	l.release <- struct{}{}
	wg.Wait()
}

func TestGroupCallerGivesUpWhileQueued(t *testing.T) {
	t.Parallel()
	l := newRunLog()
	g := newGroup(10, 1, l.run)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = g.do(t.Context(), 0, 1) })
	<-l.started
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := g.do(ctx, 1, 1)
		errc <- err
	}()
	waitQueued(t, g, 1)
	wg.Go(func() { _, _ = g.do(t.Context(), 2, 1) })
	waitQueued(t, g, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up got %v, want context.Canceled", err)
	}
	l.release <- struct{}{}
	if got := <-l.started; !slices.Equal(got, []int{2}) {
		t.Fatalf("run after the cancel = %v, want [2]: the cancelled call must not run", got)
	}
	l.release <- struct{}{}
	wg.Wait()
}

func TestGroupPanicReachesEveryCaller(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	runs := 0
	g := newGroup(10, 1, func(_ context.Context, in []int) []int {
		runs++
		if runs == 1 {
			close(started)
			<-release
			return in
		}
		panic("boom")
	})
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = g.do(t.Context(), 0, 1) })
	<-started
	panics := make([]any, 2)
	for i := range 2 {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			_, _ = g.do(t.Context(), i+1, 1)
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		q := len(g.queue)
		g.mu.Unlock()
		if q == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, p := range panics {
		if p != "boom" {
			t.Errorf("caller %d recovered %v, want the run's panic", i+1, p)
		}
	}
	if g.runs != 0 {
		t.Errorf("%d runs left in flight after a panic", g.runs)
	}
}

func TestGroupsByKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen [][]string
	gs := newGroups(10, 1, func(_ context.Context, in []string) []string {
		mu.Lock()
		seen = append(seen, in)
		mu.Unlock()
		return in
	})
	for _, k := range []string{"a", "b", "a"} {
		if out, err := gs.do(t.Context(), k, k+"!", 1); err != nil || out != k+"!" {
			t.Fatalf("do(%s) = %q, %v", k, out, err)
		}
	}
	if len(gs.m) != 0 {
		t.Errorf("%d idle groups kept, want none", len(gs.m))
	}
	if len(seen) != 3 {
		t.Errorf("runs = %v, want three runs of one", seen)
	}
}
