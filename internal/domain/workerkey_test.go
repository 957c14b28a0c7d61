package domain

import "testing"

// TestSplitLeaseOwner: a lease owner made by Principal.LeaseOwner splits
// back into its key's account and name and the worker's own ID; the
// pool's is the worker's ID alone.
func TestSplitLeaseOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p                   Principal
		worker              string
		account, key, ownID string
	}{
		{PoolPrincipal, "host-1", "", "", "host-1"},
		{PoolPrincipal, "node:7.a", "", "", "node:7.a"},
		{Principal{Account: "ada", Key: "laptop"}, "box-2", "ada", "laptop", "box-2"},
		{Principal{Account: "lab.x", Key: "k_1", Trusted: true}, "n:1", "lab.x", "k_1", "n:1"},
	} {
		owner := tc.p.LeaseOwner(tc.worker)
		account, key, id := SplitLeaseOwner(owner)
		if account != tc.account || key != tc.key || id != tc.ownID {
			t.Errorf("SplitLeaseOwner(%q) = %q, %q, %q; want %q, %q, %q", owner, account, key, id, tc.account, tc.key, tc.ownID)
		}
		if got := WorkerAccountOf(owner); got != tc.account {
			t.Errorf("WorkerAccountOf(%q) = %q, want %q", owner, got, tc.account)
		}
	}
}
