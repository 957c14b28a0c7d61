package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
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
	g := newGroup(3, l.run)
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
	if g.running || len(g.queue) != 0 {
		t.Errorf("after the calls: running %t, %d queued; want neither", g.running, len(g.queue))
	}
}

func TestGroupCallerGivesUpWhileQueued(t *testing.T) {
	t.Parallel()
	l := newRunLog()
	g := newGroup(10, l.run)
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
	g := newGroup(10, func(_ context.Context, in []int) []int {
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
	if g.running {
		t.Error("a run left in flight after a panic")
	}
}

func TestGroupsByKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen [][]string
	gs := newGroups(10, func(_ context.Context, in []string) []string {
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

// TestOrAlone: a transaction of several items that fails as a whole is run
// again item by item, so that only the item that cannot be written fails;
// when the database is unavailable it is not.
func TestOrAlone(t *testing.T) {
	t.Parallel()
	var calls [][]string
	together := func(items []string) ([]string, error) {
		calls = append(calls, slices.Clone(items))
		out := make([]string, len(items))
		var err error
		for i, it := range items {
			out[i] = "ok " + it
			switch {
			case it == "poison":
				err = errors.New("constraint violated")
			case it == "down":
				err = fmt.Errorf("%w: connection refused", domain.ErrUnavailable)
			}
		}
		if err != nil {
			for i := range out {
				out[i] = "failed " + items[i]
			}
		}
		return out, err
	}
	got := orAlone([]string{"a", "poison", "b"}, together)
	if want := []string{"ok a", "failed poison", "ok b"}; !slices.Equal(got, want) {
		t.Errorf("with a poison item: %q, want %q", got, want)
	}
	if len(calls) != 4 {
		t.Errorf("with a poison item: %d transactions %q, want the group then each alone", len(calls), calls)
	}
	calls = nil
	got = orAlone([]string{"a", "down", "b"}, together)
	if want := []string{"failed a", "failed down", "failed b"}; !slices.Equal(got, want) || len(calls) != 1 {
		t.Errorf("database unavailable: %q in %d transactions, want %q in one", got, len(calls), want)
	}
}
