package storetest

import (
	"errors"
	"fmt"
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
			c := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 1, Now: at})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 4, Now: at})
		checkIDs(t, "first claim of 4", sortedIDs(got), []string{"t6", "t7", "t8", "t9"})
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 100, Now: at})
		checkIDs(t, "second claim", sortedIDs(got), []string{"t0", "t1", "t2", "t3", "t4", "t5"})
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 100, Now: at})
		if len(got) != 0 {
			t.Errorf("claim of an empty queue returned %q", taskIDs(got))
		}
	})

	t.Run("RunAfter", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		now := Epoch()
		due, later := claimable("due", "j", 0, now, 0), claimable("later", "j", 5, now, 1)
		due.RunAfter = now // RunAfter <= Now is claimable
		later.RunAfter = now.Add(time.Microsecond)
		insertTasks(t, s, due, later)
		got := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 10, Now: now})
		checkIDs(t, "claim at now", taskIDs(got), []string{"due"})
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 10, Now: now.Add(time.Second)})
		checkIDs(t, "claim a second later", taskIDs(got), []string{"later"})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "c", Kinds: []domain.TaskKind{domain.KindStitch}, Max: 10, Now: Epoch()})
		checkIDs(t, "stitch claim", taskIDs(got), []string{"stitch"})
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: []domain.TaskKind{domain.KindTree, domain.KindChunk}, Max: 10, Now: Epoch()})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Workloads: []string{"c", "a"}, Max: 10, Now: Epoch()})
		checkIDs(t, "claim of a and c", sortedIDs(got), []string{"a1", "a2", "c1"})
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Workloads: []string{"zzz"}, Max: 10, Now: Epoch()})
		checkIDs(t, "claim of an unknown workload", taskIDs(got), nil)
		got = claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 10, Now: Epoch()})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "worker-9", Kinds: chunkKinds, Max: 5, Now: now})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 5, Now: now})
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
		got := claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: []domain.TaskKind{domain.KindChunk, domain.KindStitch, domain.KindTree}, Max: 10, Now: Epoch()})
		checkIDs(t, "claim of no pending task", taskIDs(got), nil)
		// A claimed task is leased: a second claim does not take it again.
		insertTasks(t, s, claimable("p", "j", 0, Epoch(), 9))
		checkIDs(t, "first claim", taskIDs(claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 10, Now: Epoch()})), []string{"p"})
		checkIDs(t, "second claim", taskIDs(claim(t, s, store.TaskClaimParams{Owner: "w", Kinds: chunkKinds, Max: 10, Now: Epoch()})), nil)
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
		return s.TaskClaim(t.Context(), &store.TaskClaimParams{Owner: claimer(c), Kinds: chunkKinds, Max: 1 + c%8, Now: now})
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
