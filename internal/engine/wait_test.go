package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// woken reports which of ws hold a wake-up, and takes it.
func woken(ws ...*claimer) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		select {
		case <-w.woken:
			out[i] = true
		default:
		}
	}
	return out
}

func TestClaimersWakeOnlyWhomTheWorkFeeds(t *testing.T) {
	c := &claimers{max: 10}
	join := func(kind domain.TaskKind, workloads []string, max int) *claimer {
		t.Helper()
		w, err := c.join(kind, workloads, max)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	dock := join(domain.KindChunk, []string{"dock"}, 1)
	any1 := join(domain.KindChunk, nil, 1)
	batch := join(domain.KindChunk, []string{"tanimoto"}, 5)
	any2 := join(domain.KindChunk, nil, 1)
	tree := join(domain.KindTree, nil, 1)

	for _, c2 := range []struct {
		name     string
		kind     domain.TaskKind
		workload string
		n        int
		want     []bool // dock, any1, batch, any2, tree
	}{
		{"one tanimoto task: the first claim that takes it", domain.KindChunk, "tanimoto", 1, []bool{false, true, false, false, false}},
		{"two tanimoto tasks: the first two that take it", domain.KindChunk, "tanimoto", 2, []bool{false, true, true, false, false}},
		{"six: the batch claim counts for five", domain.KindChunk, "tanimoto", 6, []bool{false, true, true, false, false}},
		{"seven: one more", domain.KindChunk, "tanimoto", 7, []bool{false, true, true, true, false}},
		{"one dock task", domain.KindChunk, "dock", 1, []bool{true, false, false, false, false}},
		{"a tree task wakes no chunk claim", domain.KindTree, "", 1, []bool{false, false, false, false, true}},
		{"unknown work wakes all", "", "", -1, []bool{true, true, true, true, true}},
	} {
		c.wake(c2.kind, c2.workload, c2.n)
		if got := woken(dock, any1, batch, any2, tree); !slices.Equal(got, c2.want) {
			t.Errorf("%s: woken %v, want %v", c2.name, got, c2.want)
		}
	}

	// A claim that left is not woken; the cap counts those waiting now.
	c.leave(any1)
	c.wake(domain.KindChunk, "x", 1)
	if got := woken(any1, any2); !slices.Equal(got, []bool{false, true}) {
		t.Errorf("after any1 left: woken %v, want only any2", got)
	}
	small := &claimers{max: 1}
	w, err := small.join(domain.KindChunk, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.join(domain.KindChunk, nil, 1); !errors.Is(err, domain.ErrBusy) {
		t.Errorf("a claim over the cap: %v, want ErrBusy", err)
	}
	small.leave(w)
	if _, err := small.join(domain.KindChunk, nil, 1); err != nil {
		t.Errorf("a claim after one left: %v", err)
	}
}

func TestFollowersWakeOnlyTheirTask(t *testing.T) {
	f := &followers{tasks: map[string]*broadcast{}, count: map[string]int{}}
	ba, doneA := f.watch("s0:a")
	bb, doneB := f.watch("s0:b")
	a, b := ba.Wait(), bb.Wait()
	f.notify("s0:a")
	select {
	case <-a:
	default:
		t.Error("a follower of a was not woken by an append to a")
	}
	select {
	case <-b:
		t.Error("a follower of b was woken by an append to a")
	default:
	}
	doneA()
	doneB()
	if len(f.tasks) != 0 || len(f.count) != 0 {
		t.Errorf("followers kept after every follower left: %v %v", f.tasks, f.count)
	}
}

func TestStreamSlots(t *testing.T) {
	s := &slots{max: 2}
	r1, err1 := s.take()
	_, err2 := s.take()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := s.take(); !errors.Is(err, domain.ErrBusy) {
		t.Errorf("a third stream of two: %v, want ErrBusy", err)
	}
	r1()
	r1() // releasing twice frees one slot only
	if _, err := s.take(); err != nil {
		t.Errorf("a stream after one closed: %v", err)
	}
	if _, err := s.take(); !errors.Is(err, domain.ErrBusy) {
		t.Errorf("releasing twice freed two slots")
	}
}
