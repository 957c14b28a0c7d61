package storetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseLifecycle(t *testing.T, newStore newFunc) {
	t.Run("TaskListExpired", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		now := Epoch()
		mk := func(id string, st domain.TaskState, expires time.Time) *domain.Task {
			tk := claimable(id, "j", 0, now, 0)
			tk.State, tk.LeaseOwner, tk.LeaseExpiresAt, tk.Attempt = st, "w", expires, 1
			return tk
		}
		insertTasks(t, s,
			mk("at-now", domain.TaskLeased, now),
			mk("3s-ago", domain.TaskLeased, now.Add(-3*time.Second)),
			mk("live", domain.TaskLeased, now.Add(time.Microsecond)),
			mk("1s-ago", domain.TaskLeased, now.Add(-time.Second)),
			mk("pending", domain.TaskPending, now.Add(-time.Hour)),
			mk("completed", domain.TaskCompleted, now.Add(-time.Hour)),
			mk("cancelled", domain.TaskCancelled, now.Add(-time.Hour)),
		)
		list := func(limit int) []*domain.Task {
			got, err := s.TaskListExpired(t.Context(), &store.TaskListExpiredParams{Now: now, Limit: limit})
			if err != nil {
				t.Fatalf("TaskListExpired: %v", err)
			}
			return got
		}
		got := list(10)
		checkIDs(t, "expired", taskIDs(got), []string{"3s-ago", "1s-ago", "at-now"})
		if len(got) > 0 {
			checkTask(t, "expired task", got[0], getTask(t, s, "3s-ago"))
		}
		checkIDs(t, "expired, limit 2", taskIDs(list(2)), []string{"3s-ago", "1s-ago"})
		checkIDs(t, "expired, limit 0 (no limit)", taskIDs(list(0)), []string{"3s-ago", "1s-ago", "at-now"})
		checkIDs(t, "expired, limit -1 (no limit)", taskIDs(list(-1)), []string{"3s-ago", "1s-ago", "at-now"})
	})

	t.Run("TaskCancelJob", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j, other := NewJob("j1", Epoch()), NewJob("j2", Epoch())
		tasks := NewTasks(j, 6) // stitch waiting, chunks pending
		tasks[2].State, tasks[2].LeaseOwner, tasks[2].LeaseExpiresAt, tasks[2].Attempt = domain.TaskLeased, "w", Epoch().Add(time.Minute), 1
		tasks[3].State, tasks[3].FinishedAt, tasks[3].Result = domain.TaskCompleted, Epoch(), []byte("x\n")
		tasks[4].State, tasks[4].FinishedAt = domain.TaskFailed, Epoch()
		tasks[5].State, tasks[5].FinishedAt = domain.TaskCancelled, Epoch()
		except := tasks[6].ID // pending, spared
		insertTasks(t, s, tasks...)
		insertTasks(t, s, NewTasks(other, 2)...)
		before := map[string]*domain.Task{}
		for _, id := range []string{tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID, tasks[4].ID, tasks[5].ID, tasks[6].ID,
			StitchTaskID("j2"), ChunkTaskID("j2", 0), ChunkTaskID("j2", 1)} {
			before[id] = getTask(t, s, id)
		}
		now := Epoch().Add(time.Hour)
		n, err := s.TaskCancelJob(ctx, &store.TaskCancelJobParams{JobID: "j1", Except: except, Now: now})
		if err != nil {
			t.Fatalf("TaskCancelJob: %v", err)
		}
		if n != 3 {
			t.Errorf("TaskCancelJob moved %d tasks, want 3 (waiting stitch, pending chunk, leased chunk)", n)
		}
		moved := map[string]bool{tasks[0].ID: true, tasks[1].ID: true, tasks[2].ID: true}
		for id, b := range before {
			got := getTask(t, s, id)
			want := cloneTask(b)
			if moved[id] {
				want.State, want.FinishedAt, want.UpdatedAt, want.Version = domain.TaskCancelled, now, now, b.Version+1
				// A cancelled task's lease has no expiry; who held it stays.
				want.LeaseExpiresAt = time.Time{}
			}
			checkTask(t, "after TaskCancelJob", got, want)
		}

		n, err = s.TaskCancelJob(ctx, &store.TaskCancelJobParams{JobID: "j1", Now: now.Add(time.Second)})
		if err != nil || n != 1 {
			t.Errorf("second TaskCancelJob = %d, %v; want 1 (the task spared before), nil", n, err)
		}
		if got := getTask(t, s, except); got.State != domain.TaskCancelled || !got.FinishedAt.Equal(now.Add(time.Second)) {
			t.Errorf("spared task is %s finished %s after the second cancel, want cancelled", got.State, fmtTime(got.FinishedAt))
		}
		n, err = s.TaskCancelJob(ctx, &store.TaskCancelJobParams{JobID: "j1", Now: now})
		if err != nil || n != 0 {
			t.Errorf("third TaskCancelJob = %d, %v; want 0, nil", n, err)
		}
		n, err = s.TaskCancelJob(ctx, &store.TaskCancelJobParams{JobID: "missing", Now: now})
		if err != nil || n != 0 {
			t.Errorf("TaskCancelJob(missing) = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("TaskRetryJob", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j, other := NewJob("j1", Epoch()), NewJob("j2", Epoch())
		tasks := NewTasks(j, 4)                                          // stitch waiting, chunks pending
		tasks[0].State, tasks[0].FinishedAt = domain.TaskFailed, Epoch() // the stitch: not a chunk, stays
		tasks[1].State, tasks[1].FinishedAt, tasks[1].Result, tasks[1].Attempt = domain.TaskCompleted, Epoch(), []byte("x\n"), 1
		tasks[2].State, tasks[2].FinishedAt, tasks[2].Attempt, tasks[2].MaxAttempts = domain.TaskFailed, Epoch(), 3, 3
		tasks[2].LeaseOwner, tasks[2].Error = "w", "boom"
		tasks[3].State, tasks[3].FinishedAt, tasks[3].Attempt = domain.TaskCancelled, Epoch(), 1
		tasks[3].LeaseOwner, tasks[3].LeaseExpiresAt = "w2", Epoch().Add(time.Minute)
		// Cancelled while a backup, attempt 2, ran: the next attempt is 3.
		tasks[3].Second = &domain.SecondLease{Owner: "w3", Attempt: 2, LeasedAt: Epoch(), ExpiresAt: Epoch().Add(time.Minute)}
		// tasks[4] stays pending
		otherTasks := NewTasks(other, 1)
		otherTasks[1].State, otherTasks[1].FinishedAt = domain.TaskFailed, Epoch()
		insertTasks(t, s, tasks...)
		insertTasks(t, s, otherTasks...)
		before := map[string]*domain.Task{}
		for _, tk := range append(append([]*domain.Task{}, tasks...), otherTasks...) {
			before[tk.ID] = getTask(t, s, tk.ID)
		}
		now := Epoch().Add(time.Hour)
		n, err := s.TaskRetryJob(ctx, &store.TaskRetryJobParams{JobID: "j1", MaxAttempts: 2, Now: now})
		if err != nil {
			t.Fatalf("TaskRetryJob: %v", err)
		}
		if n != 2 {
			t.Errorf("TaskRetryJob moved %d tasks, want 2 (the failed and the cancelled chunk)", n)
		}
		moved := map[string]bool{tasks[2].ID: true, tasks[3].ID: true}
		for id, b := range before {
			want := cloneTask(b)
			if moved[id] {
				if b.Second != nil {
					want.Attempt = b.Second.Attempt
				}
				want.State, want.MaxAttempts, want.RunAfter, want.UpdatedAt = domain.TaskPending, want.Attempt+2, time.Time{}, now
				want.LeaseExpiresAt, want.FinishedAt, want.Version, want.Second = time.Time{}, time.Time{}, b.Version+1, nil
			}
			checkTask(t, "after TaskRetryJob", getTask(t, s, id), want)
		}
		// Runnable at once: the next claim takes them (beside the chunk
		// that was pending), with no backoff to end.
		claimed := claim(t, s, store.TaskClaimParams{Owners: []string{"w", "w", "w", "w"}, Kinds: chunkKinds, Workloads: []string{j.Workload}, Now: now})
		checkIDs(t, "claim after TaskRetryJob", sortedIDs(claimed), sortedIDs([]*domain.Task{tasks[2], tasks[3], tasks[4]}))
		n, err = s.TaskRetryJob(ctx, &store.TaskRetryJobParams{JobID: "j1", MaxAttempts: 2, Now: now})
		if err != nil || n != 0 {
			t.Errorf("second TaskRetryJob = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("TaskDecrementUpstreams", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j := NewJob("j1", Epoch())
		tasks := NewTasks(j, 3)
		insertTasks(t, s, tasks...)
		id := StitchTaskID("j1")
		b := getTask(t, s, id)

		step := func(n int, now time.Time, wantLeft int, wantState domain.TaskState, version int64) {
			t.Helper()
			got, err := s.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: id, N: n, Now: now})
			if err != nil {
				t.Fatalf("TaskDecrementUpstreams(%d): %v", n, err)
			}
			want := cloneTask(b)
			want.PendingUpstreams, want.State, want.UpdatedAt, want.Version = wantLeft, wantState, now, version
			checkTask(t, fmt.Sprintf("TaskDecrementUpstreams(%d) result", n), got, want)
			checkTask(t, fmt.Sprintf("TaskDecrementUpstreams(%d) row", n), getTask(t, s, id), want)
		}
		step(1, Epoch().Add(time.Second), 2, domain.TaskWaiting, b.Version+1)
		step(2, Epoch().Add(2*time.Second), 0, domain.TaskPending, b.Version+2)

		_, err := s.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: "missing", N: 1, Now: Epoch()})
		checkErr(t, "TaskDecrementUpstreams(missing)", err, store.ErrNotFound)

		// Pinned: only a waiting task becomes pending; a cancelled one
		// keeps its state while its count still goes down.
		tree := fullTask("tree")
		tree.State, tree.PendingUpstreams = domain.TaskCancelled, 1
		insertTasks(t, s, tree)
		got, err := s.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: "tree", N: 1, Now: Epoch()})
		if err != nil {
			t.Fatalf("TaskDecrementUpstreams(cancelled): %v", err)
		}
		if got.State != domain.TaskCancelled || got.PendingUpstreams != 0 {
			t.Errorf("cancelled task after TaskDecrementUpstreams: %s with %d upstreams, want cancelled with 0", got.State, got.PendingUpstreams)
		}
	})

	t.Run("TaskResultList", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j, other := NewJob("j1", Epoch()), NewJob("j2", Epoch())
		tasks := NewTasks(j, 7)
		results := map[int][]byte{}
		for i, tk := range tasks[1:] {
			switch i {
			case 0, 2, 4, 5, 6:
				tk.State = domain.TaskCompleted
				tk.Result = fmt.Appendf(nil, "id,score\n%d,0.%d\n\x00", i, i)
				results[i] = tk.Result
			case 1:
				tk.State, tk.Result = domain.TaskFailed, []byte("partial")
			}
		}
		tasks[0].State, tasks[0].Result = domain.TaskCompleted, []byte("the stitch result")
		insertTasks(t, s, tasks[5], tasks[0], tasks[3], tasks[7], tasks[1], tasks[4], tasks[2], tasks[6])
		ot := NewTasks(other, 1)
		ot[1].State, ot[1].Result = domain.TaskCompleted, []byte("other job")
		insertTasks(t, s, ot...)

		list := func(after, limit int) string {
			t.Helper()
			got, err := s.TaskResultList(t.Context(), &store.TaskResultListParams{JobID: "j1", AfterIndex: after, Limit: limit})
			if err != nil {
				t.Fatalf("TaskResultList(after %d, limit %d): %v", after, limit, err)
			}
			var idx []int
			for _, r := range got {
				idx = append(idx, r.ChunkIndex)
				if !bytes.Equal(r.Result, results[r.ChunkIndex]) {
					t.Errorf("chunk %d result = %q, want %q", r.ChunkIndex, r.Result, results[r.ChunkIndex])
				}
			}
			return fmt.Sprint(idx)
		}
		for _, c := range []struct {
			after, limit int
			want         string
		}{
			{-1, 0, "[0 2 4 5 6]"}, // all
			{-5, -1, "[0 2 4 5 6]"},
			{-1, 2, "[0 2]"}, // pages, each after the last index of the one before
			{2, 2, "[4 5]"},
			{5, 2, "[6]"},
			{6, 2, "[]"},
			{0, 1, "[2]"}, // AfterIndex need not be a completed chunk's
			{1, 10, "[2 4 5 6]"},
		} {
			if got := list(c.after, c.limit); got != c.want {
				t.Errorf("TaskResultList(after %d, limit %d) chunk indexes = %s, want %s", c.after, c.limit, got, c.want)
			}
		}
		got, err := s.TaskResultList(t.Context(), &store.TaskResultListParams{JobID: "missing", AfterIndex: -1})
		if err != nil || len(got) != 0 {
			t.Errorf("TaskResultList(missing) = %v, %v; want none, nil", got, err)
		}
	})
}
