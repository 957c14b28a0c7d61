package worker

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// TestHeartbeatFindsAttemptEnd renews a lease that moves on twice and then
// stays where it is, as the coordinator's does once it reaches the
// attempt's deadline: heartbeat renews three times, tells atEnd the end
// that stayed, and stops, rather than beating on until the lease is gone.
func TestHeartbeatFindsAttemptEnd(t *testing.T) {
	t.Parallel()
	start := time.Now()
	end := func(d time.Duration) client.Lease {
		return client.Lease{ExpiresAt: start.Add(d), Deadline: start.Add(d)}
	}
	ends := []client.Lease{end(600 * time.Millisecond), end(900 * time.Millisecond), end(900 * time.Millisecond)}
	var mu sync.Mutex
	calls := 0
	renew := func(context.Context) (client.Lease, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls > len(ends) {
			return client.Lease{}, errAbandoned
		}
		return ends[calls-1], nil
	}
	var told time.Time
	ctx, abandon := context.WithCancelCause(t.Context())
	defer abandon(nil)
	heartbeat(ctx, abandon, renew, &leaseClock{Lease: end(300 * time.Millisecond)},
		func(at time.Time) { told = at }, make(chan struct{}), slog.New(slog.DiscardHandler))
	if calls != 3 {
		t.Errorf("heartbeat renewed %d times, want 3: twice moving the end on, once finding it stays", calls)
	}
	if !told.Equal(start.Add(900 * time.Millisecond)) {
		t.Errorf("atEnd was told %v, want the end that stayed, %v", told.Sub(start), 900*time.Millisecond)
	}
	if context.Cause(ctx) != nil {
		t.Errorf("the attempt was abandoned: %v", context.Cause(ctx))
	}
}
