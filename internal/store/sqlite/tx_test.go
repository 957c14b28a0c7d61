package sqlite

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// TestBusyIsUnavailable checks that a write lock held by another process
// (here, another connection) for longer than busy_timeout is ErrUnavailable.
func TestBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	s := openStore(t, path)
	other := openStore(t, path)
	ctx := t.Context()
	locked, release := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- other.InTx(ctx, func(q store.Querier) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	if _, err := s.writer.ExecContext(ctx, "PRAGMA busy_timeout = 50"); err != nil {
		t.Fatalf("set busy_timeout: %v", err)
	}
	err := s.JobInsert(ctx, storetest.NewJob("j1", storetest.Epoch()))
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("InTx holding the lock: %v", err)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("JobInsert while another connection holds the write lock = %v, want ErrUnavailable", err)
	}
}

// TestLargeInsert inserts a large job in one transaction: the batched insert
// keeps it to seconds, not minutes.
func TestLargeInsert(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow under -short and -race")
	}
	t.Parallel()
	s := newStore(t)
	j := storetest.NewJob("big", storetest.Epoch())
	const n = 100_000
	tasks := storetest.NewTasks(j, n)
	start := time.Now()
	err := s.InTx(t.Context(), func(q store.Querier) error {
		if err := q.JobInsert(t.Context(), j); err != nil {
			return err
		}
		return q.TaskInsert(t.Context(), tasks)
	})
	if err != nil {
		t.Fatalf("insert %d tasks: %v", n, err)
	}
	t.Logf("inserted %d tasks in %s", n+1, time.Since(start))
	all, err := s.TaskCountByJob(t.Context(), []string{"big"})
	counts := all["big"]
	if err != nil || counts.Pending != n {
		t.Errorf("TaskCountByJob = %+v, %v; want %d pending", counts, err, n)
	}
	got, err := s.TaskClaim(t.Context(), &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 3), Kinds: []domain.TaskKind{domain.KindChunk}, Now: storetest.Epoch()})
	if err != nil || len(got) != 3 {
		t.Fatalf("TaskClaim = %d tasks, %v", len(got), err)
	}
}

// TestWriterTurnsInOrder pins that uses of the writer connection are
// served in the order they asked for it: behind eight goroutines writing
// back to back, a write waits for at most the eight transactions queued or
// running ahead of it and the one in flight. (database/sql alone hands the
// one connection to a waiter picked at random, and such a write waited
// there for dozens.)
func TestWriterTurnsInOrder(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	ctx := t.Context()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE turns (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const loopers = 8
	var commits atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range loopers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := s.InTx(ctx, func(q store.Querier) error {
					commits.Add(1)
					_, err := q.(*querier).tx.ExecContext(ctx, `INSERT INTO turns VALUES (1)`)
					time.Sleep(200 * time.Microsecond) // hold the turn so that a line forms
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for commits.Load() < 100 { // every looper at work
		time.Sleep(time.Millisecond)
	}
	var worst, worstExec int64
	for range 50 {
		before := commits.Load()
		var waited int64
		err := s.InTx(ctx, func(store.Querier) error {
			waited = commits.Load() - before
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, waited)
		// Outside a transaction a write statement waits in the same line
		// (exec runs it through atomically, counted here as it runs).
		before = commits.Load()
		err = s.querier.atomically(ctx, "", func(q *querier) error {
			waited = commits.Load() - before
			_, err := q.exec(ctx, sqlWorkerDelete, 0) // deletes nothing
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		worstExec = max(worstExec, waited)
	}
	close(stop)
	wg.Wait()
	if worst > loopers+1 {
		t.Errorf("a transaction waited for %d others'; in line, at most %d are ahead of it", worst, loopers+1)
	}
	if worstExec > loopers+1 {
		t.Errorf("a write statement waited for %d transactions; in line, at most %d are ahead of it", worstExec, loopers+1)
	}
}
