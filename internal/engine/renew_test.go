package engine_test

import (
	"slices"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
)

func TestHeartbeatsTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	type call struct {
		task, worker string
		attempt      int
	}
	calls := []call{{"a0", "w", 1}, {"a0", "w", 1}, {"a1", "w", 2}, {"a2", "v", 1}, {"b0", "w", 1}, {"zz", "w", 1}, {"a3", "w", 1}}
	want := []string{"ok", "ok", "lease_lost", "lease_lost", "cancelled", "not_found", "ok"}
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		alone, together := newLeasedSetup(t, open()), newLeasedSetup(t, open())
		var got []string
		for _, c := range calls {
			_, err := alone.e.RenewLease(ctx, alone.task(c.task), c.worker, c.attempt)
			got = append(got, errClass(err))
		}
		var ids, workers []string
		var attempts []int
		for _, c := range calls {
			ids, workers, attempts = append(ids, together.task(c.task)), append(workers, c.worker), append(attempts, c.attempt)
		}
		expires, errs, txErr := together.e.RenewTogether(ctx, ids, workers, attempts)
		if txErr != nil {
			t.Fatalf("the shared transaction failed as a whole: %v", txErr)
		}
		for i := range calls {
			if got[i] != want[i] {
				t.Errorf("heartbeat %d alone: %s, want %s", i, got[i], want[i])
			}
			if c := errClass(errs[i]); c != got[i] {
				t.Errorf("heartbeat %d %+v: together %s, alone %s", i, calls[i], c, got[i])
			}
			if errs[i] == nil && expires[i].IsZero() {
				t.Errorf("heartbeat %d together: no expiry", i)
			}
		}
		v, err := together.e.GetTask(ctx, together.task("a0"))
		if err != nil || !v.LeaseExpiresAt.Equal(expires[1]) {
			t.Errorf("a0's stored lease = %v, %v; want the last renewal's %v", v.LeaseExpiresAt, err, expires[1])
		}
		if a, b := alone.states(t), together.states(t); !slices.Equal(a, b) {
			t.Errorf("tasks after the heartbeats:\nalone    %q\ntogether %q", a, b)
		}
	})
}
