package client_test

import (
	"fmt"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestListWorkers: a pool worker and the worker of a key, once they have
// claimed, come back from ListWorkers with their key's account and name
// and their trust, a page at a time; a worker's token may not list them,
// and a filter workers do not have is refused before any call.
func TestListWorkers(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	k, err := c.user.CreateWorkerKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	keyed := client.New(c.url, k.Key)
	t.Cleanup(keyed.CloseIdleConnections)
	if _, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "pool-1", Workloads: []string{"score"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := keyed.Claim(ctx, client.ClaimRequest{WorkerID: "box"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	opts := client.ListOptions{Limit: 1}
	for range 3 {
		page, err := c.user.ListWorkers(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range page.Workers {
			got = append(got, fmt.Sprintf("%s %q %q %t %q %d", w.ID, w.Account, w.Key, w.Trusted, w.Workloads, w.TasksDone))
		}
		if opts.Cursor = page.NextCursor; opts.Cursor == "" {
			break
		}
	}
	want := []string{`box "admin" "laptop" false [] 0`, `pool-1 "" "" true ["score"] 0`}
	if fmt.Sprint(got) != fmt.Sprint(want) && fmt.Sprint(got) != fmt.Sprint([]string{want[1], want[0]}) {
		t.Errorf("workers, a page of one at a time: %q, want %q (in the order of their calls)", got, want)
	}
	_, err = c.worker.ListWorkers(ctx, client.ListOptions{})
	wantCode(t, err, 403, client.CodePermissionDenied)
	if _, err := c.user.ListWorkers(ctx, client.ListOptions{Status: "running"}); err == nil || client.AsError(err) != nil {
		t.Errorf("ListWorkers with a status: %v; want refused before any call", err)
	}
}
