package client_test

import (
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// TestWorkloads: the workloads a worker names in its claims come back
// from Workloads, with the workers that name them; a worker's token may
// not list them.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	if got, err := c.user.Workloads(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Workloads before any worker: %+v, %v; want none", got, err)
	}
	before := time.Now().Add(-time.Second)
	for _, w := range []string{"w1", "w2"} {
		if _, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: w, Workloads: []string{"score", w + "-only"}}); err != nil {
			t.Fatalf("claim of %s: %v", w, err)
		}
	}
	got, err := c.user.Workloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"score", "w1-only", "w2-only"}
	counts := []int{2, 1, 1}
	if len(got) != len(names) {
		t.Fatalf("Workloads: %+v, want %q", got, names)
	}
	for i, w := range got {
		if w.Name != names[i] || w.Workers != counts[i] || w.LastSeen.Before(before) || w.LastSeen.After(time.Now()) {
			t.Errorf("workload %d: %+v, want %s named by %d workers, seen just now", i, w, names[i], counts[i])
		}
	}
	_, err = c.worker.Workloads(ctx)
	wantCode(t, err, 403, client.CodePermissionDenied)
}
