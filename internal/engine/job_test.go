package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// failingStore makes the TaskInsert of one batch fail, as a crash in the
// middle of a creation would stop it.
type failingStore struct {
	store.Store
	inserts, failAt atomic.Int64
	failDelete      atomic.Bool
}

func (f *failingStore) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	return f.Store.InTx(ctx, func(q store.Querier) error { return fn(&failingQuerier{Querier: q, f: f}) })
}

type failingQuerier struct {
	store.Querier
	f *failingStore
}

func (q *failingQuerier) TaskInsert(ctx context.Context, tasks []*domain.Task) error {
	if q.f.inserts.Add(1) == q.f.failAt.Load() {
		return errors.New("the coordinator died")
	}
	return q.Querier.TaskInsert(ctx, tasks)
}

func (q *failingQuerier) JobDeleteAbandoned(ctx context.Context, p *store.JobDeleteAbandonedParams) (bool, error) {
	if q.f.failDelete.Load() {
		return false, errors.New("the coordinator died")
	}
	return q.Querier.JobDeleteAbandoned(ctx, p)
}

// TestCreateJobInBatches creates a job of several batches. A creation that
// stops in the middle leaves no job a client sees: cleaned up at once when
// it can be, else hidden until it is stale, with its Idempotency-Key
// waiting meanwhile, then swept, and the key creates the job.
func TestCreateJobInBatches(t *testing.T) {
	t.Parallel()
	fs := &failingStore{Store: openStore(t)}
	c := enginetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEngine(fs, engine.Config{Now: c.Now})
	n := 2*engine.CreateBatch + 7
	noJobs := func(what string) {
		t.Helper()
		jobs, _, err := e.ListJobs(t.Context(), engine.ListJobsParams{})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("%s: ListJobs = %d jobs, %v; want none", what, len(jobs), err)
		}
	}

	fs.failAt.Store(3) // the root, the first batch, then this one fails
	if _, _, err := e.CreateJob(t.Context(), spec(n), "key"); err == nil {
		t.Fatal("CreateJob with a failing batch: no error")
	}
	noJobs("after a failed creation")

	// Died without cleaning up: the partial job stays hidden.
	fs.inserts.Store(0)
	fs.failDelete.Store(true)
	if _, _, err := e.CreateJob(t.Context(), spec(n), "key"); err == nil {
		t.Fatal("CreateJob with a failing batch: no error")
	}
	fs.failAt.Store(-1)
	fs.failDelete.Store(false)
	noJobs("after a creation died")
	// The same key waits while the creation may go on (its caller's
	// deadline ends the wait here: the test clock stands still).
	waitCtx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, _, err := e.CreateJob(waitCtx, spec(n), "key")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the same key while the creation may go on: %v, want it to wait until the caller's deadline", err)
	}
	if n, err := e.DeleteAbandonedJobs(t.Context()); err != nil || n != 0 {
		t.Fatalf("DeleteAbandonedJobs before it is stale = %d, %v; want 0", n, err)
	}

	c.Advance(engine.CreationStale + time.Second)
	v, created, err := e.CreateJob(t.Context(), spec(n), "key")
	if err != nil || !created || v.ChunkCount != n || v.Tasks.Total != n || v.Tasks.Pending != n {
		t.Fatalf("CreateJob once stale = %+v, %v, %v; want a whole job of %d chunks", v, created, err, n)
	}
	again, created, err := e.CreateJob(t.Context(), spec(n), "key")
	if err != nil || created || again.ID != v.ID {
		t.Fatalf("replay = %v, %v, %v; want job %s", again, created, err, v.ID)
	}
	jobs, _, err := e.ListJobs(t.Context(), engine.ListJobsParams{})
	if err != nil || len(jobs) != 1 || jobs[0].ID != v.ID {
		t.Fatalf("ListJobs = %d jobs, %v; want the whole one only", len(jobs), err)
	}
	if n, err := e.DeleteAbandonedJobs(t.Context()); err != nil || n != 0 {
		t.Fatalf("DeleteAbandonedJobs = %d, %v; nothing is left to delete", n, err)
	}
}

// slowStore makes each TaskInsert of a batch of chunks (more than one
// task) take longer than CreationStale, by its clock, and runs the
// reaper's sweep after each transaction that inserted one, as SQLite's one
// writer runs it once the batch commits. With between, the batch takes no
// time, and the wait comes after its commit instead: the next batch waits
// that long for the writer.
type slowStore struct {
	store.Store
	clock   *enginetest.Clock
	e       *engine.Engine
	between bool
}

func (s *slowStore) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	inserted := false
	err := s.Store.InTx(ctx, func(q store.Querier) error {
		inserted = false
		return fn(&slowQuerier{Querier: q, s: s, inserted: &inserted})
	})
	if err == nil && inserted && s.e != nil {
		if s.between {
			s.clock.Advance(engine.CreationStale + time.Second)
		}
		if _, err := s.e.DeleteAbandonedJobs(ctx); err != nil {
			return err
		}
	}
	return err
}

type slowQuerier struct {
	store.Querier
	s        *slowStore
	inserted *bool
}

func (q *slowQuerier) TaskInsert(ctx context.Context, tasks []*domain.Task) error {
	if len(tasks) > 1 {
		*q.inserted = true
		if !q.s.between {
			q.s.clock.Advance(engine.CreationStale + time.Second)
		}
	}
	return q.Querier.TaskInsert(ctx, tasks)
}

// TestSlowBatchNotAbandoned: a creation whose every batch takes longer
// than CreationStale, or waits that long for the database before it
// starts, is alive all along, and the reaper, running between its
// batches, leaves it be.
func TestSlowBatchNotAbandoned(t *testing.T) {
	t.Parallel()
	for _, between := range []bool{false, true} {
		c := enginetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		ss := &slowStore{Store: openStore(t), clock: c, between: between}
		e := newEngine(ss, engine.Config{Now: c.Now})
		ss.e = e
		n := 2*engine.CreateBatch + 7
		j, created, err := e.CreateJob(t.Context(), spec(n), "")
		if err != nil || !created {
			t.Fatalf("CreateJob of %d chunks, slow between batches %t: %v, %v", n, between, created, err)
		}
		if j.ChunkCount != n {
			t.Errorf("the job has %d chunks, want %d", j.ChunkCount, n)
		}
	}
}
