package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// TestDeadlockIsStale makes two transactions update two tasks in opposite
// orders. PostgreSQL aborts one of them; InTx must report it as ErrStale,
// with the server's error still reachable, and the other must commit.
func TestDeadlockIsStale(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	j := storetest.NewJob("j1", storetest.Epoch())
	if err := s.TaskInsert(ctx, storetest.NewTasks(j, 2)[1:]); err != nil {
		t.Fatal(err)
	}
	a, b := storetest.ChunkTaskID("j1", 0), storetest.ChunkTaskID("j1", 1)

	// Each transaction updates its first task, waits until the other has
	// updated its own, then updates the other's.
	lockedA, lockedB := make(chan struct{}), make(chan struct{})
	touch := func(q store.Querier, id string) error {
		tk, err := q.TaskGet(ctx, id)
		if err != nil {
			return err
		}
		tk.Error = "touched"
		return q.TaskUpdate(ctx, tk)
	}
	run := func(first, second string, mine, theirs chan struct{}) error {
		return s.InTx(ctx, func(q store.Querier) error {
			if err := touch(q, first); err != nil {
				return err
			}
			close(mine)
			<-theirs
			return touch(q, second)
		})
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = run(a, b, lockedA, lockedB) })
	wg.Go(func() { errs[1] = run(b, a, lockedB, lockedA) })
	wg.Wait()

	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("got errors %v; want exactly one transaction to fail", errs)
	}
	var pgErr *pgconn.PgError
	if !errors.Is(failed[0], store.ErrStale) || !errors.As(failed[0], &pgErr) || pgErr.Code != "40P01" {
		t.Errorf("the deadlock came back as %v; want ErrStale wrapping SQLSTATE 40P01", failed[0])
	}
}

// TestDuplicateKeepsTxUsable checks that a refused insert inside a
// transaction leaves it usable: the caller may look up the existing row and
// commit the rest.
func TestDuplicateKeepsTxUsable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t)
	j := storetest.NewJob("j1", storetest.Epoch())
	j.IdempotencyKey = "k"
	tasks := storetest.NewTasks(j, 3)
	err := s.InTx(ctx, func(q store.Querier) error {
		if err := q.JobInsert(ctx, j); err != nil {
			return err
		}
		if err := q.TaskInsert(ctx, tasks[:2]); err != nil {
			return err
		}
		again := storetest.NewJob("j2", storetest.Epoch())
		again.IdempotencyKey = "k"
		if err := q.JobInsert(ctx, again); !errors.Is(err, store.ErrDuplicate) {
			return fmt.Errorf("JobInsert of a taken key: got %v, want ErrDuplicate", err)
		}
		if err := q.TaskInsert(ctx, tasks[1:]); !errors.Is(err, store.ErrDuplicate) {
			return fmt.Errorf("TaskInsert of a taken ID: got %v, want ErrDuplicate", err)
		}
		if _, err := q.JobGetByIdempotencyKey(ctx, domain.AdminAccount, "k"); err != nil {
			return fmt.Errorf("JobGetByIdempotencyKey after a refused insert: %w", err)
		}
		return q.TaskInsert(ctx, tasks[2:])
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	for _, tk := range tasks {
		if _, err := s.TaskGet(ctx, tk.ID); err != nil {
			t.Errorf("TaskGet(%s) after the commit: %v", tk.ID, err)
		}
	}
	if _, err := s.JobGet(ctx, "j2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("JobGet of the refused job: got %v, want ErrNotFound", err)
	}
}

// TestDecrementUpstreamsConcurrent completes all upstreams of one task at once:
// no decrement may be lost, and exactly one call sees the task turn pending.
func TestDecrementUpstreamsConcurrent(t *testing.T) {
	t.Parallel()
	const upstreams = 64
	ctx := t.Context()
	s, _ := openURL(t, "pool_max_conns=32")
	j := storetest.NewJob("j1", storetest.Epoch())
	stitch := storetest.NewTasks(j, upstreams)[0]
	if err := s.TaskInsert(ctx, []*domain.Task{stitch}); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		turned int
		errs   []error
	)
	for range upstreams {
		wg.Go(func() {
			tk, err := s.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: stitch.ID, N: 1, Now: storetest.Epoch()})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if tk.State == domain.TaskPending && tk.PendingUpstreams == 0 {
				turned++
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if turned != 1 {
		t.Errorf("%d calls saw the task turn pending, want 1", turned)
	}
	got, err := s.TaskGet(ctx, stitch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != domain.TaskPending || got.PendingUpstreams != 0 || got.Version != stitch.Version+upstreams {
		t.Errorf("after %d completions: %s, %d upstreams, version %d; want pending, 0, %d",
			upstreams, got.State, got.PendingUpstreams, got.Version, stitch.Version+upstreams)
	}
}

// TestUnavailable checks that a database that does not answer, and a
// closed store, report ErrUnavailable.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=5")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open of a closed port: got %v, want ErrUnavailable", err)
	}

	s := open(t)
	s.Close()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping of a closed store: got %v, want ErrUnavailable", err)
	}
	if _, err := s.JobGet(ctx, "x"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("JobGet on a closed store: got %v, want ErrUnavailable", err)
	}
}
