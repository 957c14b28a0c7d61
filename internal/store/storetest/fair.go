package storetest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// ownedJob returns the chunk tasks of a job of owner with n chunks,
// created at created, of priority and workload, pending and runnable.
func ownedJob(owner, id string, created time.Time, priority, n int, workload string) []*domain.Task {
	j := NewJob(id, created)
	j.Priority, j.Workload, j.Owner = priority, workload, owner
	tasks := NewTasks(j, n)[1:]
	for _, tk := range tasks {
		tk.Owner = owner
	}
	return tasks
}

// workEpoch is the WorkEpoch of the suite's fair claims: addWork moves it,
// as the engine does when it adds work.
var workEpoch atomic.Uint64

// addWork inserts tasks and tells fair claims of new work.
func addWork(t testing.TB, q store.Querier, tasks ...*domain.Task) {
	t.Helper()
	if err := q.TaskInsert(t.Context(), tasks); err != nil {
		t.Fatalf("TaskInsert(%d tasks): %v", len(tasks), err)
	}
	workEpoch.Add(1)
}

func insertAccount(t *testing.T, q store.Querier, name string, weight, maxRunning int) {
	t.Helper()
	a := &domain.Account{Name: name, Weight: weight, MaxRunning: maxRunning, CreatedAt: Epoch(), UpdatedAt: Epoch()}
	if err := q.AccountInsert(t.Context(), a); err != nil {
		t.Fatalf("AccountInsert(%s): %v", name, err)
	}
}

// fairClaim makes a fair claim of n tasks of workloads (nil: any) at now,
// by workers w0, w1, … in that order, and returns the tasks by worker:
// the i-th in claim order first.
func fairClaim(t *testing.T, q store.Querier, n int, now time.Time, workloads ...string) []*domain.Task {
	t.Helper()
	return fairClaimKind(t, q, domain.KindChunk, n, now, workloads...)
}

func fairClaimKind(t *testing.T, q store.Querier, kind domain.TaskKind, n int, now time.Time, workloads ...string) []*domain.Task {
	t.Helper()
	owners := make([]string, n)
	for i := range owners {
		owners[i] = fmt.Sprintf("w%04d", i)
	}
	got := claim(t, q, store.TaskClaimParams{Owners: owners, Kinds: []domain.TaskKind{kind}, Workloads: workloads, Now: now, Fair: true,
		WorkEpoch: workEpoch.Load()})
	slices.SortFunc(got, func(a, b *domain.Task) int { return strings.Compare(a.LeaseOwner, b.LeaseOwner) })
	for i, tk := range got {
		if tk.LeaseOwner != owners[i] {
			t.Fatalf("a fair claim of %d leased %d tasks, to %s …: not to the first owners in order", n, len(got), tk.LeaseOwner)
		}
		if tk.State != domain.TaskLeased || tk.Attempt != 1 || !tk.LeasedAt.Equal(now) {
			t.Fatalf("task %s came back %s, attempt %d, leased at %v; want leased at %v", tk.ID, tk.State, tk.Attempt, tk.LeasedAt, now)
		}
	}
	return got
}

// singleClaims makes n fair claims of one task each, a microsecond apart
// from now on, and returns what they leased in order.
func singleClaims(t *testing.T, q store.Querier, n int, now time.Time, workloads ...string) []*domain.Task {
	t.Helper()
	var out []*domain.Task
	for i := range n {
		out = append(out, fairClaim(t, q, 1, now.Add(time.Duration(i)*time.Microsecond), workloads...)...)
	}
	return out
}

func ownersOf(tasks []*domain.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.Owner
	}
	return out
}

func jobsOf(tasks []*domain.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.JobID
	}
	return out
}

func countOwners(tasks []*domain.Task) map[string]int {
	out := map[string]int{}
	for _, tk := range tasks {
		out[tk.Owner]++
	}
	return out
}

// complete finishes tasks just leased, as a worker's result would.
func complete(t *testing.T, q store.Querier, at time.Time, tasks ...*domain.Task) {
	t.Helper()
	for _, tk := range tasks {
		finish(tk, domain.TaskCompleted, at)
		tk.LeaseExpiresAt = time.Time{}
	}
	if err := q.TaskUpdateMany(t.Context(), tasks); err != nil {
		t.Fatalf("complete %d tasks: %v", len(tasks), err)
	}
}

func checkCountsOf(t *testing.T, what string, got, want map[string]int) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func exerciseFairClaim(t *testing.T, newStore newFunc) {
	at := Epoch()

	t.Run("SharesByWeight", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertAccount(t, s, "light", 1, 0)
		insertAccount(t, s, "heavy", 3, 0)
		addWork(t, s, ownedJob("light", "jl", at, 0, 40, "w")...)
		addWork(t, s, ownedJob("heavy", "jh", at.Add(time.Second), 0, 40, "w")...)
		// Nothing leased: both are at 0 per weight, and neither was ever
		// served, so the name decides the first; then leases per weight,
		// ties (1 and 3, 2 and 6) to the one served longest ago.
		checkIDs(t, "owners of 8 single claims", ownersOf(singleClaims(t, s, 8, at)),
			[]string{"heavy", "light", "heavy", "heavy", "light", "heavy", "heavy", "heavy"})
		// 2 and 6 leased: a claim of 7 goes on as 7 single claims would.
		checkIDs(t, "owners of a claim of 7", ownersOf(fairClaim(t, s, 7, at.Add(time.Second))),
			[]string{"light", "heavy", "heavy", "heavy", "light", "heavy", "heavy"})
	})

	t.Run("TiesToTheAccountServedLongestAgo", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, name := range []string{"a", "b", "c"} {
			addWork(t, s, ownedJob(name, "j"+name, at, 0, 10, "w")...)
		}
		// Each task is done before the next claim, so no account ever has
		// a lease: only when each was served tells them apart.
		var got []string
		for i := range 7 {
			now := at.Add(time.Duration(i) * time.Second)
			c := fairClaim(t, s, 1, now)
			got = append(got, ownersOf(c)...)
			complete(t, s, now, c...)
		}
		checkIDs(t, "owners of claims done at once", got, []string{"a", "b", "c", "a", "b", "c", "a"})
		// A claim of 2 serves the two served longest ago, in that order;
		// the next claim serves the third first.
		c := fairClaim(t, s, 2, at.Add(time.Minute))
		checkIDs(t, "owners of a claim of 2", ownersOf(c), []string{"b", "c"})
		complete(t, s, at.Add(time.Minute), c...)
		checkIDs(t, "owners of the claim after it", ownersOf(fairClaim(t, s, 3, at.Add(2*time.Minute))), []string{"a", "b", "c"})
	})

	t.Run("WithinAnAccount", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		addWork(t, s, ownedJob("a", "old", at, 0, 5, "w")...)
		addWork(t, s, ownedJob("a", "new", at.Add(time.Second), 0, 2, "w")...)
		addWork(t, s, ownedJob("a", "urgent", at.Add(time.Hour), 1, 1, "w")...)
		// Priority first; then the job with the fewest leased tasks, ties
		// to the oldest job; a job's tasks by chunk index.
		got := singleClaims(t, s, 9, at)
		checkIDs(t, "jobs of single claims", jobsOf(got), []string{"urgent", "old", "new", "old", "new", "old", "old", "old"})
		checkIDs(t, "tasks of single claims", taskIDs(got), []string{ChunkTaskID("urgent", 0), ChunkTaskID("old", 0), ChunkTaskID("new", 0),
			ChunkTaskID("old", 1), ChunkTaskID("new", 1), ChunkTaskID("old", 2), ChunkTaskID("old", 3), ChunkTaskID("old", 4)})

		// The same from a claim of 7 and one of 2 on a fresh store.
		s = newStore(t)
		addWork(t, s, ownedJob("a", "old", at, 0, 5, "w")...)
		addWork(t, s, ownedJob("a", "new", at.Add(time.Second), 0, 2, "w")...)
		addWork(t, s, ownedJob("a", "urgent", at.Add(time.Hour), 1, 1, "w")...)
		batch := append(fairClaim(t, s, 7, at), fairClaim(t, s, 2, at)...)
		checkIDs(t, "tasks of claims of 7 and 2", taskIDs(batch), taskIDs(got))
	})

	t.Run("ASmallJobBesideABigOne", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		addWork(t, s, ownedJob("a", "big", at, 0, 300, "w")...)
		// The big job takes the workers there are; small jobs come after,
		// one of the same account and one of another.
		fairClaim(t, s, 4, at)
		addWork(t, s, ownedJob("a", "small", at.Add(time.Second), 0, 4, "w")...)
		addWork(t, s, ownedJob("b", "other", at.Add(2*time.Second), 0, 4, "w")...)
		// The next workers go to the account without leases, then to the
		// job without leases, not to the big job that came first.
		checkIDs(t, "jobs of the next claim of 4", jobsOf(fairClaim(t, s, 4, at)), []string{"other", "other", "other", "other"})
		checkIDs(t, "jobs of the claim after it", jobsOf(fairClaim(t, s, 5, at)), []string{"small", "small", "small", "small", "big"})
	})

	t.Run("MaxRunning", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertAccount(t, s, "capped", 5, 2)
		addWork(t, s, ownedJob("capped", "jc", at, 0, 10, "w")...)
		addWork(t, s, ownedJob("free", "jf", at.Add(time.Second), 0, 10, "w")...)
		got := fairClaim(t, s, 6, at)
		checkCountsOf(t, "owners of a claim of 6", countOwners(got), map[string]int{"capped": 2, "free": 4})
		// At its cap: its tasks wait, and with no other work the claim
		// comes back empty rather than fail.
		checkCountsOf(t, "owners of the next claim", countOwners(fairClaim(t, s, 10, at)), map[string]int{"free": 6})
		if extra := fairClaim(t, s, 3, at); len(extra) != 0 {
			t.Fatalf("a claim with only a capped account's work leased %q", taskIDs(extra))
		}
		// One lease ends: one more.
		complete(t, s, at.Add(time.Second), got[slices.IndexFunc(got, func(tk *domain.Task) bool { return tk.Owner == "capped" })])
		checkCountsOf(t, "owners after one ended", countOwners(fairClaim(t, s, 3, at.Add(time.Second))), map[string]int{"capped": 1})
	})

	t.Run("Workloads", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		addWork(t, s, ownedJob("a", "ja", at, 0, 5, "x")...)
		addWork(t, s, ownedJob("b", "jb", at, 0, 5, "y")...)
		addWork(t, s, ownedJob("c", "jc", at, 0, 5, "z")...)
		// Only accounts with work the claim can run take part; their
		// leases of other workloads still count against them.
		checkCountsOf(t, "a claim of x", countOwners(fairClaim(t, s, 3, at, "x")), map[string]int{"a": 3})
		checkIDs(t, "owners of a claim of x and y", ownersOf(fairClaim(t, s, 4, at, "x", "y")), []string{"b", "b", "b", "a"})
		checkCountsOf(t, "a claim of any", countOwners(fairClaim(t, s, 6, at)), map[string]int{"a": 1, "b": 1, "c": 4})
	})

	t.Run("Trees", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// A tree counts as a job of its owner: its ID is its tasks' JobID.
		var tasks []*domain.Task
		for i, tree := range []struct{ id, owner string }{{"t1", "a"}, {"t2", "a"}, {"t3", "b"}} {
			for k := range 3 {
				tk := treeTask(fmt.Sprintf("%s.%d", tree.id, k), tree.id, domain.TaskPending, at.Add(time.Duration(i)*time.Second))
				tk.Owner, tk.ChunkIndex = tree.owner, k
				tasks = append(tasks, tk)
			}
		}
		addWork(t, s, tasks...)
		got := fairClaimKind(t, s, domain.KindTree, 4, at)
		checkIDs(t, "trees of a claim of 4", jobsOf(got), []string{"t1", "t3", "t2", "t3"})
		if c := fairClaim(t, s, 1, at); len(c) != 0 {
			t.Errorf("a claim of chunks leased tree tasks %q", taskIDs(c))
		}
	})

	t.Run("ShortJobs", func(t *testing.T) {
		t.Parallel()
		// Jobs with fewer tasks than a claim would give them: what they
		// cannot take goes to the others, as single claims would give it.
		fill := func(s store.Store) {
			insertAccount(t, s, "b", 2, 0)
			addWork(t, s, ownedJob("a", "a1", at, 0, 1, "w")...)
			addWork(t, s, ownedJob("a", "a2", at, 0, 2, "w")...)
			addWork(t, s, ownedJob("b", "b1", at, 0, 3, "w")...)
			addWork(t, s, ownedJob("c", "c1", at.Add(-time.Second), 0, 20, "w")...)
		}
		one, batch := newStore(t), newStore(t)
		fill(one)
		fill(batch)
		want := countOwners(singleClaims(t, one, 14, at))
		checkCountsOf(t, "single claims", want, map[string]int{"a": 3, "b": 3, "c": 8})
		checkCountsOf(t, "one claim of 14", countOwners(fairClaim(t, batch, 14, at)), want)
	})

	t.Run("LargeClaimsInUnits", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, name := range []string{"a", "b", "c", "d"} {
			for j := range 3 {
				addWork(t, s, ownedJob(name, fmt.Sprintf("%s%d", name, j), at.Add(time.Duration(j)*time.Second), 0, 20, "w")...)
			}
		}
		// A claim of 32 picks in units of 8: each account gets its share,
		// a run of 8 chunks of its oldest job; the next claim of 32, a run
		// of the next job, which has the fewest leased.
		for i, want := range []int{0, 1} {
			got := fairClaim(t, s, 32, at)
			checkCountsOf(t, fmt.Sprintf("owners of claim %d of 32", i+1), countOwners(got), map[string]int{"a": 8, "b": 8, "c": 8, "d": 8})
			runs := map[string][]int{}
			for _, tk := range got {
				runs[tk.JobID] = append(runs[tk.JobID], tk.ChunkIndex)
			}
			for _, name := range []string{"a", "b", "c", "d"} {
				job := fmt.Sprintf("%s%d", name, want)
				if !slices.Equal(runs[job], []int{0, 1, 2, 3, 4, 5, 6, 7}) {
					t.Errorf("claim %d of 32 took %v of job %s (all: %v); want its chunks 0 to 7", i+1, runs[job], job, runs)
				}
			}
		}
	})

	t.Run("UnitsNoLargerThanAJob", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, name := range []string{"a", "b"} {
			for j := range 10 {
				addWork(t, s, ownedJob(name, fmt.Sprintf("%s%d", name, j), at.Add(time.Duration(j)*time.Second), 0, 3, "w")...)
			}
		}
		// Units of 16, jobs of 3: each pick is spread over as many jobs as
		// it needs, so one claim takes all 60 tasks.
		got := fairClaim(t, s, 64, at)
		checkCountsOf(t, "owners of a claim of 64", countOwners(got), map[string]int{"a": 30, "b": 30})
	})

	t.Run("WhatAClaimRemembers", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		addWork(t, s, ownedJob("a", "ja", at, 0, 10, "w")...)
		checkIDs(t, "owners of the first claim", ownersOf(fairClaim(t, s, 1, at)), []string{"a"})
		// Work the engine did not hear of (the epoch stays): a claim may
		// rely on what the claim before read for FairMemoFor.
		insertTasks(t, s, ownedJob("b", "jb", at, 0, 10, "w")...)
		if got := ownersOf(fairClaim(t, s, 1, at.Add(store.FairMemoFor/2))); !slices.Equal(got, []string{"a"}) && !slices.Equal(got, []string{"b"}) {
			t.Fatalf("owners of a claim meanwhile: %q", got)
		}
		fresh := fairClaim(t, s, 2, at.Add(store.FairMemoFor))
		if c := countOwners(fresh); c["b"] == 0 {
			t.Errorf("owners of a claim FairMemoFor later: %v; want b's work seen", c)
		}
		// Work heard of is seen at once.
		addWork(t, s, ownedJob("c", "jc", at, 0, 10, "w")...)
		checkIDs(t, "owners of a claim after new work", ownersOf(fairClaim(t, s, 1, at.Add(store.FairMemoFor))), []string{"c"})
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const accounts, jobs, perJob = 4, 3, 40
		for a := range accounts {
			insertAccount(t, s, fmt.Sprintf("acct%d", a), 1+a, 3*a) // acct0 without a cap
			for j := range jobs {
				addWork(t, s, ownedJob(fmt.Sprintf("acct%d", a), fmt.Sprintf("j%d-%d", a, j), at.Add(time.Duration(j)*time.Second), 0, perJob, "w")...)
			}
		}
		claimer := func(c int) string { return fmt.Sprintf("c%02d", c) }
		owner := claimConcurrently(t, 16, 10*accounts*jobs*perJob, func(c int) ([]*domain.Task, error) {
			return s.TaskClaim(t.Context(), &store.TaskClaimParams{Owners: slices.Repeat([]string{claimer(c)}, 1+c%5),
				Kinds: chunkKinds, Now: at.Add(time.Minute), Fair: true, WorkEpoch: workEpoch.Load()})
		}, func(tk *domain.Task) string { return tk.ID }, func(c int, tk *domain.Task) error {
			if tk.LeaseOwner != claimer(c) || tk.State != domain.TaskLeased || tk.Attempt != 1 {
				return fmt.Errorf("task %s claimed by %s came back owned by %q, %s, attempt %d", tk.ID, claimer(c), tk.LeaseOwner, tk.State, tk.Attempt)
			}
			return nil
		})
		byAccount := map[string]int{}
		for id := range owner {
			byAccount[strings.SplitN(strings.TrimPrefix(id, "0:j"), "-", 2)[0]]++
		}
		// Nothing completes, so the capped accounts end at their caps and
		// the uncapped one is drained.
		checkCountsOf(t, "tasks leased by account", byAccount, map[string]int{"0": jobs * perJob, "1": 3, "2": 6, "3": 9})
	})
}
