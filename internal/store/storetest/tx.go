package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

var errBoom = errors.New("storetest: boom")

func exerciseTx(t *testing.T, newStore newFunc) {
	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("j1", Epoch())
		err := s.InTx(t.Context(), func(q store.Querier) error {
			if err := q.JobInsert(t.Context(), j); err != nil {
				return err
			}
			return q.TaskInsert(t.Context(), NewTasks(j, 3))
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		getJob(t, s, "j1")
		getTask(t, s, ChunkTaskID("j1", 2))
	})

	t.Run("RollbackOnError", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		insertJobs(t, s, NewJob("old", Epoch()))
		insertTasks(t, s, claimable("p", "old", 0, Epoch(), 0))
		before, beforeTask := getJob(t, s, "old"), getTask(t, s, "p")
		err := s.InTx(ctx, func(q store.Querier) error {
			j := NewJob("j1", Epoch())
			if err := q.JobInsert(ctx, j); err != nil {
				return err
			}
			if err := q.TaskInsert(ctx, NewTasks(j, 2)); err != nil {
				return err
			}
			old, err := q.JobGet(ctx, "old")
			if err != nil {
				return err
			}
			old.Status = domain.JobCancelled
			if err := q.JobUpdate(ctx, old); err != nil {
				return err
			}
			if _, err := q.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 1), Kinds: chunkKinds, Now: Epoch()}); err != nil {
				return err
			}
			return fmt.Errorf("give up: %w", errBoom)
		})
		checkErr(t, "InTx returning an error", err, errBoom)
		_, err = s.JobGet(ctx, "j1")
		checkErr(t, "JobGet of a rolled-back insert", err, store.ErrNotFound)
		_, err = s.TaskGet(ctx, ChunkTaskID("j1", 0))
		checkErr(t, "TaskGet of a rolled-back insert", err, store.ErrNotFound)
		checkJob(t, "job after a rolled-back update", getJob(t, s, "old"), before)
		checkTask(t, "task after a rolled-back claim", getTask(t, s, "p"), beforeTask)
	})

	t.Run("SeesItsOwnWrites", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		err := s.InTx(ctx, func(q store.Querier) error {
			j := NewJob("j1", Epoch())
			j.IdempotencyKey = "k"
			if err := q.JobInsert(ctx, j); err != nil {
				return err
			}
			if err := q.TaskInsert(ctx, NewTasks(j, 3)); err != nil {
				return err
			}
			if _, err := q.JobGet(ctx, "j1"); err != nil {
				return fmt.Errorf("JobGet inside the tx: %w", err)
			}
			if _, err := q.JobGetByIdempotencyKey(ctx, domain.AdminAccount, "k"); err != nil {
				return fmt.Errorf("JobGetByIdempotencyKey inside the tx: %w", err)
			}
			if got, err := q.JobList(ctx, &store.JobListParams{Limit: 10}); err != nil || len(got) != 1 {
				return fmt.Errorf("JobList inside the tx = %d jobs, %v; want 1", len(got), err)
			}
			// Outside the transaction nothing shows before the commit.
			if _, err := s.JobGet(ctx, "j1"); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("JobGet outside the tx before commit: got %v, want ErrNotFound", err)
			}
			claimed, err := q.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 2), Kinds: chunkKinds, Now: Epoch()})
			if err != nil || len(claimed) != 2 {
				return fmt.Errorf("TaskClaim inside the tx = %d tasks, %v; want 2", len(claimed), err)
			}
			if j, err := q.JobGet(ctx, "j1"); err != nil || j.Status != domain.JobRunning {
				return fmt.Errorf("JobGet after TaskClaim inside the tx = %v, %v; want the job running", j, err)
			}
			all, err := q.TaskCountByJob(ctx, []string{"j1"})
			counts := all["j1"]
			if err != nil || counts.Leased != 2 || counts.Pending != 1 {
				return fmt.Errorf("TaskCountByJob inside the tx = %+v, %v; want 2 leased, 1 pending", counts, err)
			}
			tk, err := q.TaskGet(ctx, claimed[0].ID)
			if err != nil || tk.State != domain.TaskLeased {
				return fmt.Errorf("TaskGet of a task claimed inside the tx = %v, %v", tk, err)
			}
			tk.State, tk.Result, tk.FinishedAt = domain.TaskCompleted, []byte("r"), Epoch()
			if err := q.TaskUpdate(ctx, tk); err != nil {
				return err
			}
			if rs, err := q.TaskResultList(ctx, &store.TaskResultListParams{JobID: "j1", AfterIndex: -1, Limit: 10}); err != nil || len(rs) != 1 {
				return fmt.Errorf("TaskResultList inside the tx = %v, %v; want 1", rs, err)
			}
			if ts, err := q.TaskList(ctx, &store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 10, AfterIndex: -1}); err != nil || len(ts) != 3 {
				return fmt.Errorf("TaskList inside the tx = %d tasks, %v; want 3", len(ts), err)
			}
			if ts, err := q.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: Epoch().Add(time.Hour), Limit: 10}); err != nil || len(ts) != 1 {
				return fmt.Errorf("TaskListExpired inside the tx = %d tasks, %v; want 1", len(ts), err)
			}
			if _, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: StitchTaskID("j1"), N: 1, Now: Epoch()}); err != nil {
				return err
			}
			if n, err := q.TaskCancelJob(ctx, &store.TaskCancelJobParams{JobID: "j1", Now: Epoch()}); err != nil || n != 3 {
				return fmt.Errorf("TaskCancelJob inside the tx = %d, %v; want 3", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		if got := getTask(t, s, StitchTaskID("j1")); got.State != domain.TaskCancelled || got.PendingUpstreams != 2 {
			t.Errorf("stitch after the tx: %s with %d upstreams, want cancelled with 2", got.State, got.PendingUpstreams)
		}
	})

	t.Run("ErrorsKeepTheirIdentity", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		insertJobs(t, s, NewJob("j1", Epoch()))
		err := s.InTx(ctx, func(q store.Querier) error {
			j, err := q.JobGet(ctx, "j1")
			if err != nil {
				return err
			}
			j.Version--
			return q.JobUpdate(ctx, j)
		})
		checkErr(t, "InTx with a stale JobUpdate", err, store.ErrStale)
		err = s.InTx(ctx, func(q store.Querier) error { return q.JobInsert(ctx, NewJob("j1", Epoch())) })
		checkErr(t, "InTx with a duplicate JobInsert", err, store.ErrDuplicate)
		err = s.InTx(ctx, func(q store.Querier) error { _, err := q.TaskGet(ctx, "missing"); return err })
		checkErr(t, "InTx with a missing TaskGet", err, store.ErrNotFound)
		// The store still works after failed transactions.
		insertJobs(t, s, NewJob("j2", Epoch()))
	})

	t.Run("ConcurrentReadModifyWrite", func(t *testing.T) {
		t.Parallel()
		exerciseConcurrentTx(t, newStore)
	})

	t.Run("Ping", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.Ping(t.Context()); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

// exerciseConcurrentTx has 8 goroutines each increment a counter 10 times in
// read-modify-write transactions guarded by the version, rerunning on
// ErrStale, and checks that no increment was lost.
func exerciseConcurrentTx(t *testing.T, newStore newFunc) {
	const workers, each = 8, 10
	s := newStore(t)
	ctx := t.Context()
	insertTasks(t, s, fullTask("counter"))
	start := getTask(t, s, "counter")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				for attempt := 0; ; attempt++ {
					err := s.InTx(ctx, func(q store.Querier) error {
						tk, err := q.TaskGet(ctx, "counter")
						if err != nil {
							return err
						}
						tk.PendingUpstreams++
						return q.TaskUpdate(ctx, tk)
					})
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrStale) || attempt > 1000 {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("InTx: %v", err)
	}
	got := getTask(t, s, "counter")
	if got.PendingUpstreams != start.PendingUpstreams+workers*each || got.Version != start.Version+workers*each {
		t.Errorf("after %d increments: PendingUpstreams %d, Version %d; want %d, %d", workers*each,
			got.PendingUpstreams, got.Version, start.PendingUpstreams+workers*each, start.Version+workers*each)
	}
}
