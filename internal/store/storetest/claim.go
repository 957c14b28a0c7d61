package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// claimable returns a pending chunk task that can be claimed from Epoch on.
func claimable(id, jobID string, priority int, jobCreated time.Time, index int) *domain.Task {
	return &domain.Task{
		ID:           id,
		JobID:        jobID,
		Kind:         domain.KindChunk,
		Workload:     "tanimoto",
		ChunkIndex:   index,
		State:        domain.TaskPending,
		MaxAttempts:  3,
		LeaseSeconds: 60,
		RunAfter:     Epoch().Add(-time.Minute),
		Priority:     priority,
		JobCreatedAt: jobCreated,
		InputURI:     "blob:" + id,
		InputSHA256:  "sha",
		CreatedAt:    Epoch().Add(-time.Minute),
		UpdatedAt:    Epoch().Add(-time.Minute),
	}
}

func claim(t *testing.T, q store.Querier, p store.TaskClaimParams) []*domain.Task {
	t.Helper()
	got, err := q.TaskClaim(t.Context(), &p)
	if err != nil {
		t.Fatalf("TaskClaim(%+v): %v", p, err)
	}
	return got
}

func sortedIDs(tasks []*domain.Task) []string {
	ids := taskIDs(tasks)
	sort.Strings(ids)
	return ids
}

var chunkKinds = []domain.TaskKind{domain.KindChunk}

func exerciseClaim(t *testing.T, newStore newFunc) {
	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		insertTasks(t, s,
			claimable("A", "j9", 5, at.Add(10*time.Second), 3),
			claimable("B", "j9", 5, at.Add(10*time.Second), 1),
			claimable("C", "jz", 5, at, 0),
			claimable("D", "ja", 5, at, 7),
			claimable("E", "jq", 9, at.Add(time.Hour), 0),
			claimable("F", "jb", -3, at.Add(-time.Hour), 0),
			// Pinned: a zero JobCreatedAt (a tree task of no job) is the
			// earliest instant, so it sorts first among equal priorities
			// (SQL: NULLS FIRST).
			claimable("G", "", 5, time.Time{}, 4),
		)
		// Priority descending, then JobCreatedAt, JobID, ChunkIndex ascending.
		var got []string
		for range 8 {
			c := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 1), Kinds: chunkKinds, Now: at})
			if len(c) > 1 {
				t.Fatalf("TaskClaim with Max 1 returned %d tasks", len(c))
			}
			got = append(got, taskIDs(c)...)
		}
		checkIDs(t, "claim order", got, []string{"E", "G", "D", "C", "B", "A", "F"})
	})

	t.Run("MaxTakesTheFirstInOrder", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		for i := range 10 {
			insertTasks(t, s, claimable(fmt.Sprintf("t%d", i), "j", 0, at, 9-i))
		}
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 4), Kinds: chunkKinds, Now: at})
		checkIDs(t, "first claim of 4", sortedIDs(got), []string{"t6", "t7", "t8", "t9"})
		got = claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 100), Kinds: chunkKinds, Now: at})
		checkIDs(t, "second claim", sortedIDs(got), []string{"t0", "t1", "t2", "t3", "t4", "t5"})
		got = claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 100), Kinds: chunkKinds, Now: at})
		if len(got) != 0 {
			t.Errorf("claim of an empty queue returned %q", taskIDs(got))
		}
	})

	t.Run("RunAfter", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		now := Epoch()
		due, later := claimable("due", "j", 0, now, 0), claimable("later", "j", 5, now, 1)
		due.RunAfter = now.Add(time.Second) // in backoff (a RunAfter not after UpdatedAt is stored as none)
		later.RunAfter = now.Add(time.Second + time.Microsecond)
		other := claimable("other", "j", 0, now, 2)
		other.RunAfter = now.Add(time.Second)
		// Not pending: TaskMakeRunnable neither counts nor changes it.
		held := claimable("held", "j", 0, now, 3)
		held.State, held.LeaseOwner, held.LeaseExpiresAt, held.RunAfter = domain.TaskLeased, "w0", now.Add(time.Hour), now.Add(time.Second)
		insertTasks(t, s, due, later, other, held)
		heldBefore := getTask(t, s, "held")
		// Past its backoff, a task is not claimable before TaskMakeRunnable.
		checkIDs(t, "claim past every backoff", taskIDs(claim(t, s, store.TaskClaimParams{Owners: []string{"w"}, Kinds: chunkKinds, Now: now.Add(time.Hour)})), nil)
		makeRunnable := func(at time.Time, limit int) int {
			t.Helper()
			n, err := s.TaskMakeRunnable(t.Context(), &store.TaskMakeRunnableParams{Now: at, Limit: limit})
			if err != nil {
				t.Fatalf("TaskMakeRunnable(%v, %d): %v", at, limit, err)
			}
			return n
		}
		// Backoff passed is not claimable until TaskMakeRunnable says so.
		at := now.Add(time.Second)
		checkIDs(t, "claim once the backoff passed", taskIDs(claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: at})), nil)
		if n := makeRunnable(now, 10); n != 0 {
			t.Errorf("TaskMakeRunnable before any backoff passed = %d, want 0", n)
		}
		if n := makeRunnable(at, 1); n != 1 {
			t.Errorf("TaskMakeRunnable(limit 1) = %d, want 1", n)
		}
		if n := makeRunnable(at, 10); n != 1 {
			t.Errorf("TaskMakeRunnable of the rest due = %d, want 1 (later is not due)", n)
		}
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: at})
		checkIDs(t, "claim after TaskMakeRunnable", sortedIDs(got), []string{"due", "other"})
		for _, tk := range got {
			if !tk.RunAfter.IsZero() {
				t.Errorf("claimed %s has RunAfter %v, want none", tk.ID, tk.RunAfter)
			}
		}
		if n := makeRunnable(at.Add(time.Microsecond), 10); n != 1 {
			t.Errorf("TaskMakeRunnable of later = %d, want 1", n)
		}
		checkIDs(t, "claim of later", taskIDs(claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: at})), []string{"later"})
		checkTask(t, "the leased task after TaskMakeRunnable", getTask(t, s, "held"), heldBefore)
	})

	t.Run("Owners", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		insertTasks(t, s, claimable("t3", "j", 0, at, 3), claimable("t0", "j", 0, at, 0), claimable("t2", "j", 0, at, 2),
			claimable("t1", "j", 0, at, 1), claimable("t4", "j", 0, at, 4))
		// In claim order, task i goes to owner i.
		got := claim(t, s, store.TaskClaimParams{Owners: []string{"c", "a", "b"}, Kinds: chunkKinds, Now: at})
		owners := map[string]string{}
		for _, tk := range got {
			owners[tk.ID] = tk.LeaseOwner
			if stored := getTask(t, s, tk.ID); stored.LeaseOwner != tk.LeaseOwner || stored.State != domain.TaskLeased {
				t.Errorf("stored %s: owner %q state %s, returned owner %q", tk.ID, stored.LeaseOwner, stored.State, tk.LeaseOwner)
			}
		}
		if want := map[string]string{"t0": "c", "t1": "a", "t2": "b"}; !maps.Equal(owners, want) {
			t.Errorf("owners = %v, want %v", owners, want)
		}
		// More owners than tasks: the first in line are served.
		got = claim(t, s, store.TaskClaimParams{Owners: []string{"x", "y", "z"}, Kinds: chunkKinds, Now: at})
		owners = map[string]string{}
		for _, tk := range got {
			owners[tk.ID] = tk.LeaseOwner
		}
		if want := map[string]string{"t3": "x", "t4": "y"}; !maps.Equal(owners, want) {
			t.Errorf("owners of the last two = %v, want %v", owners, want)
		}
		if got := claim(t, s, store.TaskClaimParams{Kinds: chunkKinds, Now: at}); len(got) != 0 {
			t.Errorf("claim with no owners = %v, want none", taskIDs(got))
		}
	})

	// Tasks whose claim-order keys are equal (a tree's tasks at one
	// position are) still go one to each owner.
	t.Run("OwnersOfEqualKeys", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		var tasks []*domain.Task
		for i := range 12 {
			tasks = append(tasks, claimable(fmt.Sprintf("same-%02d", i), "j", 0, at, 0))
		}
		insertTasks(t, s, tasks...)
		for round := range 3 {
			owners := []string{fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round), fmt.Sprintf("c%d", round)}
			got := claim(t, s, store.TaskClaimParams{Owners: owners, Kinds: chunkKinds, Now: at})
			var gotOwners []string
			for _, tk := range got {
				gotOwners = append(gotOwners, tk.LeaseOwner)
			}
			slices.Sort(gotOwners)
			if !slices.Equal(gotOwners, owners) {
				t.Errorf("round %d: owners %q, want one task each for %q", round, gotOwners, owners)
			}
		}
	})

	t.Run("MarksJobsRunning", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mk := func(id string, st domain.JobStatus) *domain.Job {
			j := NewJob(id, Epoch())
			j.Status = st
			return j
		}
		insertJobs(t, s, mk("p1", domain.JobPending), mk("p2", domain.JobPending), mk("p3", domain.JobPending),
			mk("r", domain.JobRunning), mk("x", domain.JobCancelled))
		before := map[string]*domain.Job{}
		for _, id := range []string{"p1", "p2", "p3", "r", "x"} {
			before[id] = getJob(t, s, id)
		}
		at := Epoch()
		insertTasks(t, s, claimable("p1-0", "p1", 0, at, 0), claimable("p1-1", "p1", 0, at, 1), claimable("p3-0", "p3", 0, at, 0),
			claimable("r-0", "r", 0, at, 0), claimable("x-0", "x", 0, at, 0))
		now := Epoch().Add(time.Second)
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: now})
		checkIDs(t, "claimed", sortedIDs(got), []string{"p1-0", "p1-1", "p3-0", "r-0", "x-0"})
		for id, b := range before {
			want := cloneJob(b)
			if id == "p1" || id == "p3" {
				// Pinned: moving a job is a write, so it bumps the version
				// (once, however many of its tasks were claimed).
				want.Status, want.UpdatedAt, want.Version = domain.JobRunning, now, b.Version+1
			}
			checkJob(t, "after the claim, job "+id, getJob(t, s, id), want)
		}
	})

	t.Run("Kinds", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mk := func(id string, k domain.TaskKind) *domain.Task {
			tk := claimable(id, "j", 0, Epoch(), 0)
			tk.Kind = k
			return tk
		}
		insertTasks(t, s, mk("chunk", domain.KindChunk), mk("stitch", domain.KindStitch), mk("tree", domain.KindTree))
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"c"}, 10), Kinds: []domain.TaskKind{domain.KindStitch}, Now: Epoch()})
		checkIDs(t, "stitch claim", taskIDs(got), []string{"stitch"})
		got = claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: []domain.TaskKind{domain.KindTree, domain.KindChunk}, Now: Epoch()})
		checkIDs(t, "chunk and tree claim", sortedIDs(got), []string{"chunk", "tree"})
	})

	t.Run("Workloads", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mk := func(id, w string) *domain.Task {
			tk := claimable(id, "j", 0, Epoch(), 0)
			tk.Workload = w
			return tk
		}
		insertTasks(t, s, mk("a1", "a"), mk("b1", "b"), mk("c1", "c"), mk("a2", "a"))
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Workloads: []string{"c", "a"}, Now: Epoch()})
		checkIDs(t, "claim of a and c", sortedIDs(got), []string{"a1", "a2", "c1"})
		got = claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Workloads: []string{"zzz"}, Now: Epoch()})
		checkIDs(t, "claim of an unknown workload", taskIDs(got), nil)
		got = claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: Epoch()})
		checkIDs(t, "claim of any workload", taskIDs(got), []string{"b1"})
	})

	t.Run("LeasesWhatItReturns", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		short, long := claimable("short", "j", 0, Epoch(), 0), claimable("long", "j", 0, Epoch(), 1)
		short.LeaseSeconds, long.LeaseSeconds = 30, 300
		long.Attempt, long.Error = 2, "attempt 2 timed out"
		insertTasks(t, s, short, long)
		before := map[string]*domain.Task{"short": getTask(t, s, "short"), "long": getTask(t, s, "long")}
		now := Epoch().Add(123 * time.Microsecond)
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"worker-9"}, 5), Kinds: chunkKinds, Now: now})
		checkIDs(t, "claim", sortedIDs(got), []string{"long", "short"})
		for _, tk := range got {
			b := before[tk.ID]
			if b == nil {
				continue
			}
			want := cloneTask(b)
			want.State = domain.TaskLeased
			want.LeaseOwner = "worker-9"
			want.Attempt = b.Attempt + 1
			want.LeaseExpiresAt = now.Add(time.Duration(b.LeaseSeconds) * time.Second)
			want.UpdatedAt = now
			want.LeasedAt = now
			want.Version = b.Version + 1
			checkTask(t, "claimed task as returned", tk, want)
			checkTask(t, "claimed task as stored", getTask(t, s, tk.ID), want)
		}
	})

	t.Run("AttemptDeadline", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mk := func(id string, lease, timeout int) *domain.Task {
			tk := claimable(id, "j", 0, Epoch(), len(id))
			tk.LeaseSeconds, tk.TimeoutSeconds = lease, timeout
			return tk
		}
		// A timeout shorter than the lease caps the lease at the deadline;
		// a longer one leaves the lease as it is. Without a timeout there
		// is no deadline, and a claim clears the one of an earlier attempt.
		short, long, none := mk("short", 60, 20), mk("long", 30, 3600), mk("none", 45, 0)
		none.Attempt, none.AttemptDeadline = 1, Epoch().Add(-time.Minute)
		insertTasks(t, s, short, long, none)
		now := Epoch().Add(7 * time.Microsecond)
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 5), Kinds: chunkKinds, Now: now})
		checkIDs(t, "claim", sortedIDs(got), []string{"long", "none", "short"})
		want := map[string][2]time.Time{ // lease expiry, deadline
			"short": {now.Add(20 * time.Second), now.Add(20 * time.Second)},
			"long":  {now.Add(30 * time.Second), now.Add(time.Hour)},
			"none":  {now.Add(45 * time.Second), {}},
		}
		for _, tk := range append(got, getTask(t, s, "short"), getTask(t, s, "long"), getTask(t, s, "none")) {
			w := want[tk.ID]
			if !tk.LeaseExpiresAt.Equal(w[0]) || !tk.AttemptDeadline.Equal(w[1]) {
				t.Errorf("claimed %s (lease %d s, timeout %d s): lease expires %s, deadline %s; want %s, %s",
					tk.ID, tk.LeaseSeconds, tk.TimeoutSeconds, fmtTime(tk.LeaseExpiresAt), fmtTime(tk.AttemptDeadline),
					fmtTime(w[0]), fmtTime(w[1]))
			}
		}
	})

	t.Run("OnlyPendingTasks", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var tasks []*domain.Task
		for i, st := range []domain.TaskState{domain.TaskWaiting, domain.TaskLeased, domain.TaskCompleted, domain.TaskFailed, domain.TaskCancelled} {
			tk := claimable(string(st), "j", 0, Epoch(), i)
			tk.State = st
			if st == domain.TaskLeased { // even with its lease long expired
				tk.LeaseOwner, tk.LeaseExpiresAt, tk.Attempt = "old", Epoch().Add(-time.Hour), 1
			}
			tasks = append(tasks, tk)
		}
		insertTasks(t, s, tasks...)
		got := claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: []domain.TaskKind{domain.KindChunk, domain.KindStitch, domain.KindTree}, Now: Epoch()})
		checkIDs(t, "claim of no pending task", taskIDs(got), nil)
		// A claimed task is leased: a second claim does not take it again.
		insertTasks(t, s, claimable("p", "j", 0, Epoch(), 9))
		checkIDs(t, "first claim", taskIDs(claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: Epoch()})), []string{"p"})
		checkIDs(t, "second claim", taskIDs(claim(t, s, store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10), Kinds: chunkKinds, Now: Epoch()})), nil)
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		exerciseConcurrentClaim(t, newStore)
	})
}

// exerciseConcurrentClaim has 16 claimers drain 500 tasks and checks that
// every task was handed out exactly once.
func exerciseConcurrentClaim(t *testing.T, newStore newFunc) {
	const (
		jobs     = 5
		perJob   = 100
		claimers = 16
	)
	s := newStore(t)
	for j := range jobs {
		job := NewJob(fmt.Sprintf("j%d", j), Epoch().Add(time.Duration(j)*time.Second))
		job.Priority = j % 2
		insertTasks(t, s, NewTasks(job, perJob)[1:]...)
	}
	now := Epoch().Add(time.Minute)
	claimer := func(c int) string { return fmt.Sprintf("w%02d", c) }
	owner := claimConcurrently(t, claimers, 10*jobs*perJob, func(c int) ([]*domain.Task, error) {
		return s.TaskClaim(t.Context(), &store.TaskClaimParams{Owners: slices.Repeat([]string{claimer(c)}, 1+c%8), Kinds: chunkKinds, Now: now})
	}, func(tk *domain.Task) string { return tk.ID }, func(c int, tk *domain.Task) error {
		if me := claimer(c); tk.LeaseOwner != me || tk.State != domain.TaskLeased || tk.Attempt != 1 {
			return fmt.Errorf("task %s claimed by %s came back owned by %q, %s, attempt %d", tk.ID, me, tk.LeaseOwner, tk.State, tk.Attempt)
		}
		return nil
	})
	if len(owner) != jobs*perJob {
		t.Fatalf("claimers took %d tasks, want %d", len(owner), jobs*perJob)
	}
	for j := range jobs {
		id := fmt.Sprintf("j%d", j)
		all, err := s.TaskCountByJob(t.Context(), []string{id})
		if err != nil {
			t.Fatalf("TaskCountByJob: %v", err)
		}
		counts := all[id]
		if counts.Leased != perJob || counts.Total != perJob {
			t.Errorf("job j%d counts %+v after the claims, want all %d leased", j, counts, perJob)
		}
	}
	for id, c := range owner {
		if got, me := getTask(t, s, id), claimer(c); got.LeaseOwner != me || got.Attempt != 1 {
			t.Errorf("task %s is stored as owned by %q attempt %d; claim returned it to %s", id, got.LeaseOwner, got.Attempt, me)
		}
	}
}

// claimConcurrently has claimers goroutines call claim, each until it comes
// back empty twice, rerunning a reported lost race (store.ErrStale) as
// callers do, and returns which claimer got each item by key. It fails the
// test on an error, on an item handed out twice, on an item check refuses,
// and on a claimer still claiming after maxRounds calls.
func claimConcurrently[T any, K comparable](t *testing.T, claimers, maxRounds int, claim func(c int) ([]T, error),
	key func(T) K, check func(c int, item T) error) map[K]int {
	t.Helper()
	var (
		mu      sync.Mutex
		owner   = map[K]int{}
		dupes   []string
		errs    []error
		wg      sync.WaitGroup
		retries int
	)
	for c := range claimers {
		wg.Go(func() {
			for round, empty := 0, 0; empty < 2; round++ {
				got, err := claim(c)
				mu.Lock()
				switch {
				case round >= maxRounds:
					errs = append(errs, fmt.Errorf("claimer %d still claims after %d rounds", c, round))
					empty = 2
				case errors.Is(err, store.ErrStale) && retries < 1000:
					retries++
				case err != nil:
					errs = append(errs, err)
					empty = 2
				case len(got) == 0:
					empty++
				}
				for _, item := range got {
					k := key(item)
					if prev, ok := owner[k]; ok {
						dupes = append(dupes, fmt.Sprintf("%v to %d and %d", k, prev, c))
					}
					owner[k] = c
					if err := check(c, item); err != nil {
						errs = append(errs, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(dupes) > 0 {
		t.Fatalf("%d items were claimed twice: %q", len(dupes), dupes)
	}
	return owner
}
