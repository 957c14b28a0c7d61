package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestLeaseExpiryByReaper checks the reaper: a lease renewed in time is
// left alone; one that runs out puts its task back to pending at once
// while attempts remain, with the reason, and fails the task and its job
// on the last attempt.
func TestLeaseExpiryByReaper(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 2)
	ctx := t.Context()
	reap := func(want int) {
		t.Helper()
		if n, err := b.e.ExpireLeases(ctx); err != nil || n != want {
			t.Fatalf("ExpireLeases = %d, %v; want %d", n, err, want)
		}
	}
	b.clock.Advance(50 * time.Second)
	if _, err := b.e.RenewLease(ctx, b.task.ID, "w1", 1); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(50 * time.Second) // past the first expiry, not the renewed one
	reap(0)

	b.clock.Advance(10 * time.Second) // the renewed lease's expiry
	reap(1)
	got := b.stored(t)
	if got.State != domain.TaskPending || got.Attempt != 1 || got.RunAfter.After(b.clock.Now()) ||
		!strings.Contains(got.Error, `lease of attempt 1 expired: worker "w1" stopped heartbeating`) {
		t.Fatalf("after the first expiry: %s at attempt %d, run after %v, error %q; want pending at once",
			got.State, got.Attempt, got.RunAfter, got.Error)
	}
	reap(0) // once only

	b.claim(t, "w2", 2)
	b.clock.Advance(60 * time.Second)
	reap(1)
	if got := b.stored(t); got.State != domain.TaskFailed {
		t.Fatalf("after the last attempt's expiry: %s, want failed", got.State)
	}
	job, err := b.e.GetJob(ctx, b.job)
	if err != nil || job.Status != domain.JobFailed || !strings.Contains(job.Error, "after 2 attempt(s)") {
		t.Fatalf("job after its chunk's last lease expired: %+v, %v; want failed", job, err)
	}
}
