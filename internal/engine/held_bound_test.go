package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestHeldBound checks that the leases an engine remembers stay within
// heldMax, the expired ones let go first, and that a task no longer leased
// is forgotten.
func TestHeldBound(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lease := func(i int, expires time.Time) *domain.Task {
		return &domain.Task{ID: fmt.Sprintf("t%d", i), State: domain.TaskLeased, LeaseOwner: "w", Attempt: 1, LeaseExpiresAt: expires}
	}
	h := newHeld()
	for i := range heldMax - 1 {
		h.keep(now, lease(i, now.Add(time.Minute)))
	}
	h.keep(now, lease(-1, now.Add(-time.Second))) // full now, with one lease expired
	h.keep(now, lease(heldMax, now.Add(time.Minute)))
	if len(h.m) != heldMax {
		t.Fatalf("%d leases remembered; want %d", len(h.m), heldMax)
	}
	if _, ok := h.m["t-1"]; ok {
		t.Errorf("the expired lease is still remembered when a new one came to a full memory")
	}
	if h.lease(fmt.Sprintf("t%d", heldMax), "w", 1, now) == nil || h.lease("t0", "w", 1, now) == nil {
		t.Errorf("a live lease was let go while an expired one could go")
	}
	if h.lease("t5", "w", 2, now) != nil || h.lease("t5", "v", 1, now) != nil || h.lease("t5", "w", 1, now.Add(time.Minute)) != nil {
		t.Errorf("a snapshot served a lease it does not show (another attempt, another worker, expired)")
	}
	h.keep(now, lease(heldMax+1, now.Add(time.Minute))) // full of live leases
	if len(h.m) > heldMax {
		t.Fatalf("%d leases remembered; want at most %d", len(h.m), heldMax)
	}
	if h.lease(fmt.Sprintf("t%d", heldMax+1), "w", 1, now) == nil {
		t.Errorf("the newest lease was not kept")
	}

	done := lease(heldMax+1, time.Time{})
	done.State = domain.TaskCompleted
	h.keep(now, done)
	if h.lease(done.ID, "w", 1, now) != nil {
		t.Errorf("a completed task's lease is still served")
	}
}
