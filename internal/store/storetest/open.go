package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseTaskListOpen: an untrusted worker of an account finds, in claim
// order, the chunks of "any" jobs, the chunks of its account's "own"
// jobs, and the replicas of chunks none of whose other replicas its
// account holds or completed, or ran when they were made (Voters); never a trusted job's chunk, another
// account's "own" chunk, a task in backoff, or another workload's; and
// the workers mode reads back as written. Asked for replicas alone, it
// finds no chunk.
func exerciseTaskListOpen(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	at := Epoch()
	mk := func(id, owner string, workers domain.WorkerMode, priority, index int) *domain.Task {
		c := claimable(id, "j-"+id, priority, at, index)
		c.Owner, c.Workers = owner, workers
		return c
	}
	replica := func(chunk, id, owner string, state domain.TaskState, leaseOwner string) *domain.Task {
		r := claimable(id, "j-"+chunk, 0, at, 0)
		r.Kind, r.Owner, r.Workers, r.State, r.LeaseOwner = domain.KindReplica, owner, domain.WorkersAny, state, leaseOwner
		if state == domain.TaskLeased {
			r.Attempt, r.LeaseExpiresAt = 1, at.Add(time.Minute)
		}
		return r
	}
	backoff := mk("backoff", "carol", domain.WorkersAny, 9, 0)
	backoff.RunAfter = at.Add(time.Hour)
	other := mk("other", "carol", domain.WorkersAny, 9, 0)
	other.Workload = "dock"
	insertTasks(t, s,
		mk("trusted", "carol", "", 9, 0),
		mk("any-low", "carol", domain.WorkersAny, -1, 0),
		mk("any", "carol", domain.WorkersAny, 1, 0),
		mk("own-alice", "alice", domain.WorkersOwn, 1, 1),
		mk("own-bob", "bob", domain.WorkersOwn, 1, 2),
		backoff, other,
		// Chunk x: alice runs one replica, so the other is bob's to take.
		replica("x", "x.r1", "carol", domain.TaskLeased, "alice/laptop@w1"),
		replica("x", "x.r2", "carol", domain.TaskPending, ""),
		// Chunk y: alice's replica failed; she may try again.
		replica("y", "y.r1", "carol", domain.TaskFailed, "alice/laptop@w1"),
		replica("y", "y.r2", "carol", domain.TaskPending, ""),
		// Chunk z: bob completed one; alice may take the other.
		replica("z", "z.r1", "carol", domain.TaskCompleted, "bob/pc@w2"),
		replica("z", "z.r2", "carol", domain.TaskPending, "alice/laptop@w1"), // released by alice earlier
	)
	// Chunk w: made when alice ran another replica of it, which her
	// account is not to see leased or completed yet.
	w := replica("w", "w.r2", "carol", domain.TaskPending, "")
	w.Voters = ",alice,"
	insertTasks(t, s, w)
	if got := getTask(t, s, "w.r2"); got.Voters != ",alice," {
		t.Fatalf("w.r2's voters read back as %q", got.Voters)
	}
	if got, err := s.TaskGet(ctx, "own-alice"); err != nil || got.Workers != domain.WorkersOwn {
		t.Fatalf("TaskGet(own-alice) = %+v, %v; want workers own", got, err)
	}
	list := func(account string, workloads []string, limit int, replicasOnly bool, skip ...string) []string {
		t.Helper()
		got, err := s.TaskListOpen(ctx, &store.TaskListOpenParams{Account: account, Workloads: workloads, Limit: limit, ReplicasOnly: replicasOnly, Skip: skip})
		if err != nil {
			t.Fatalf("TaskListOpen(%s): %v", account, err)
		}
		return taskIDs(got)
	}
	for _, tc := range []struct {
		account   string
		workloads []string
		limit     int
		want      []string
	}{
		{"alice", nil, 100, []string{"other", "any", "own-alice", "y.r2", "z.r2", "any-low"}},
		{"bob", nil, 100, []string{"other", "any", "own-bob", "w.r2", "x.r2", "y.r2", "any-low"}},
		{"dave", nil, 100, []string{"other", "any", "w.r2", "x.r2", "y.r2", "z.r2", "any-low"}},
		{"dave", []string{"dock"}, 100, []string{"other"}},
		{"dave", []string{"dock", "tanimoto"}, 2, []string{"other", "any"}},
	} {
		if got := list(tc.account, tc.workloads, tc.limit, false); !slices.Equal(got, tc.want) {
			t.Errorf("TaskListOpen(%s, %v, %d) = %v; want %v", tc.account, tc.workloads, tc.limit, got, tc.want)
		}
	}
	// A second look passes over what the first read.
	if got, want := list("dave", nil, 3, false, "other", "w.r2"), []string{"any", "x.r2", "y.r2"}; !slices.Equal(got, want) {
		t.Errorf("TaskListOpen skipping other and w.r2 = %v; want %v", got, want)
	}
	// The pool (no account) looks for replicas alone.
	if got, want := list("", nil, 100, true), []string{"w.r2", "x.r2", "y.r2", "z.r2"}; !slices.Equal(got, want) {
		t.Errorf("TaskListOpen of replicas alone = %v; want %v", got, want)
	}
}

// exerciseTaskCountVoting: the chunks of a job leased to the vote are
// counted, up to the limit; chunks leased to workers, and other jobs',
// are not.
func exerciseTaskCountVoting(t *testing.T, newStore newFunc) {
	s := newStore(t)
	at := Epoch()
	mk := func(id, job, owner string) *domain.Task {
		c := claimable(id, job, 0, at, 0)
		c.State, c.LeaseOwner, c.Attempt, c.LeaseExpiresAt = domain.TaskLeased, owner, 1, at.Add(time.Hour)
		return c
	}
	insertTasks(t, s, mk("a0", "ja", domain.QuorumLeaseOwner), mk("a1", "ja", domain.QuorumLeaseOwner),
		mk("a2", "ja", "w1"), mk("b0", "jb", domain.QuorumLeaseOwner))
	for _, c := range []struct {
		job         string
		limit, want int
	}{{"ja", 10, 2}, {"ja", 1, 1}, {"jb", 10, 1}, {"jc", 10, 0}} {
		if got, err := s.TaskCountVoting(t.Context(), c.job, c.limit); err != nil || got != c.want {
			t.Errorf("TaskCountVoting(%s, %d) = %d, %v; want %d", c.job, c.limit, got, err, c.want)
		}
	}
}
