package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseTaskListOpen: an untrusted worker of an account finds, in claim
// order, the chunks of "any" jobs, the chunks of its account's "own"
// jobs, and the chunks being voted on that have a pending ballot and no
// ballot its account holds or completed; never a trusted job's chunk,
// another account's "own" chunk, a task in backoff, a vote with no
// ballot pending, or another workload's; and the workers mode and voters
// read back as written. Asked for ballots alone, it finds no pending
// chunk; asked to pass over an owner's pending chunks, it finds the
// ballots of that owner's votes still.
func exerciseTaskListOpen(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	at := Epoch()
	mk := func(id, owner string, workers domain.WorkerMode, priority, index int) *domain.Task {
		c := claimable(id, "j-"+id, priority, at, index)
		c.Owner, c.Workers = owner, workers
		return c
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
		// Chunk x: alice runs one ballot, so the other is bob's to take.
		voted(mk("x", "carol", domain.WorkersAny, 0, 0), at, "leased alice/laptop@w1", "pending"),
		// Chunk y: alice's ballot failed; she may try again.
		voted(mk("y", "carol", domain.WorkersAny, 0, 0), at, "failed alice/laptop@w1", "pending"),
		// Chunk z: bob completed one; alice may take the other.
		voted(mk("z", "carol", domain.WorkersAny, 0, 0), at, "completed bob/pc@w2", "pending"),
		// Chunk w: both ballots leased, none for anyone else.
		voted(mk("w", "carol", domain.WorkersAny, 0, 0), at, "leased alice/laptop@w1", "leased bob/pc@w2"),
	)
	if got := getTask(t, s, "z"); got.Voters != ",bob," || len(got.Ballots) != 2 {
		t.Fatalf("z read back with voters %q and ballots %+v", got.Voters, got.Ballots)
	}
	if got, err := s.TaskGet(ctx, "own-alice"); err != nil || got.Workers != domain.WorkersOwn {
		t.Fatalf("TaskGet(own-alice) = %+v, %v; want workers own", got, err)
	}
	list := func(account string, workloads []string, limit int, ballotsOnly bool, skip ...string) []string {
		t.Helper()
		got, err := s.TaskListOpen(ctx, &store.TaskListOpenParams{Account: account, Workloads: workloads, Limit: limit, BallotsOnly: ballotsOnly, Skip: skip})
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
		{"alice", nil, 100, []string{"other", "any", "own-alice", "y", "z", "any-low"}},
		{"bob", nil, 100, []string{"other", "any", "own-bob", "x", "y", "any-low"}},
		{"dave", nil, 100, []string{"other", "any", "x", "y", "z", "any-low"}},
		{"dave", []string{"dock"}, 100, []string{"other"}},
		{"dave", []string{"dock", "tanimoto"}, 2, []string{"other", "any"}},
	} {
		if got := list(tc.account, tc.workloads, tc.limit, false); !slices.Equal(got, tc.want) {
			t.Errorf("TaskListOpen(%s, %v, %d) = %v; want %v", tc.account, tc.workloads, tc.limit, got, tc.want)
		}
	}
	// A second look passes over what the first read.
	if got, want := list("dave", nil, 3, false, "other", "x"), []string{"any", "y", "z"}; !slices.Equal(got, want) {
		t.Errorf("TaskListOpen skipping other and x = %v; want %v", got, want)
	}
	// An account at its max_running: none of its pending chunks, but the
	// ballots of its votes.
	got, err := s.TaskListOpen(ctx, &store.TaskListOpenParams{Account: "dave", Limit: 100, SkipPendingOf: []string{"carol", "nobody"}})
	if want := []string{"x", "y", "z"}; err != nil || !slices.Equal(taskIDs(got), want) {
		t.Errorf("TaskListOpen passing over carol's pending chunks = %v, %v; want %v", taskIDs(got), err, want)
	}
	// The pool (no account) looks for ballots alone.
	if got, want := list("", nil, 100, true), []string{"x", "y", "z"}; !slices.Equal(got, want) {
		t.Errorf("TaskListOpen of ballots alone = %v; want %v", got, want)
	}
}

// voted puts chunk c to a vote at at with a ballot for each of ballots,
// "STATE [LEASE_OWNER]": pending, or leased, completed or failed by the
// lease owner.
func voted(c *domain.Task, at time.Time, ballots ...string) *domain.Task {
	rs := domain.StartVote(c, len(ballots), "nobody", at)
	for i, b := range ballots {
		state, owner, _ := strings.Cut(b, " ")
		r := rs[i]
		if state != "pending" {
			domain.Lease(r, owner, at)
		}
		switch state {
		case "completed":
			if _, err := domain.Complete(r, owner, 1, []byte("x\n"), nil, at); err != nil {
				panic(err)
			}
		case "failed":
			domain.Retry(r, "exit 1", false, 0, at)
		}
		domain.FoldBallot(c, r)
	}
	return c
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
