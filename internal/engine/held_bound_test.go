package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestHeldBound checks that the leases an engine remembers stay within
// heldMax, the expired ones let go first (all of them when too few have
// expired), and that a task no longer leased is forgotten.
func TestHeldBound(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lease := func(i int, expires time.Time) *domain.Task {
		return &domain.Task{ID: fmt.Sprintf("t%d", i), State: domain.TaskLeased, LeaseOwner: "w", Attempt: 1, LeaseExpiresAt: expires}
	}
	h := newHeld(heldMax, heldBytes)
	for i := range heldMax {
		expires := now.Add(time.Minute)
		if i%2 == 1 {
			expires = now.Add(-time.Second)
		}
		h.keep(now, lease(i, expires)) // full now, half of it expired
	}
	h.keep(now, lease(heldMax, now.Add(time.Minute)))
	if len(h.m) != heldMax/2+1 {
		t.Fatalf("%d leases remembered; want the %d live ones", len(h.m), heldMax/2+1)
	}
	if _, ok := h.m["t1"]; ok {
		t.Errorf("an expired lease is still remembered when a new one came to a full memory")
	}
	if h.lease(fmt.Sprintf("t%d", heldMax), "w", 1, now) == nil || h.lease("t0", "w", 1, now) == nil {
		t.Errorf("a live lease was let go while expired ones could go")
	}
	if h.lease("t4", "w", 2, now) != nil || h.lease("t4", "v", 1, now) != nil || h.lease("t4", "w", 1, now.Add(time.Minute)) != nil {
		t.Errorf("a snapshot served a lease it does not show (another attempt, another worker, expired)")
	}
	for i := range heldMax { // full of live leases: all are let go
		h.keep(now, lease(heldMax+1+i, now.Add(time.Minute)))
		if len(h.m) > heldMax {
			t.Fatalf("%d leases remembered; want at most %d", len(h.m), heldMax)
		}
	}
	if h.lease("t0", "w", 1, now) != nil {
		t.Errorf("a memory full of live leases was not cleared")
	}
	newest := fmt.Sprintf("t%d", 2*heldMax)
	if h.lease(newest, "w", 1, now) == nil {
		t.Errorf("the newest lease was not kept")
	}

	// A few expired in a full memory: sweeping for them at every lease
	// would cost the whole memory each time, so all are let go.
	h = newHeld(heldMax, heldBytes)
	for i := range heldMax {
		expires := now.Add(time.Minute)
		if i < 10 {
			expires = now.Add(-time.Second)
		}
		h.keep(now, lease(i, expires))
	}
	h.keep(now, lease(heldMax, now.Add(time.Minute)))
	if len(h.m) != 1 {
		t.Errorf("%d leases remembered after a sweep that freed 10; want only the newest", len(h.m))
	}

	big := lease(-1, now.Add(time.Minute))
	big.Error = strings.Repeat("x", heldBytes) // an earlier attempt's long error
	h.keep(now, big)
	if h.lease(big.ID, "w", 1, now) != nil {
		t.Errorf("a task of more than heldBytes was remembered")
	}

	done := lease(2*heldMax, time.Time{})
	done.State = domain.TaskCompleted
	h.keep(now, done)
	if h.lease(done.ID, "w", 1, now) != nil {
		t.Errorf("a completed task's lease is still served")
	}
}
