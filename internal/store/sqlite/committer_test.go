package sqlite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// walCommits counts the commits in the write-ahead log at path: the frames
// of its current generation that end a transaction (their header holds the
// database's size after it, where other frames hold 0). The count only
// grows while no checkpoint restarts the log; groupStore turns the
// automatic ones off.
func walCommits(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatalf("read the write-ahead log: %v", err)
	}
	if len(b) < 32 {
		return 0
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	salts := b[16:24]
	n := 0
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		h := b[off : off+24]
		if !bytes.Equal(h[8:16], salts) { // a frame of an earlier generation
			break
		}
		if binary.BigEndian.Uint32(h[4:8]) != 0 {
			n++
		}
	}
	return n
}

// groupStore opens a store on a file of its own, without automatic
// checkpoints (see walCommits), whose groups stay open for as long as
// there are callers in line: under the race detector a fn takes
// milliseconds, and a group would end after a few of them.
func groupStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "scimesh.db"))
	if _, err := s.writer.ExecContext(t.Context(), "PRAGMA wal_autocheckpoint = 0"); err != nil {
		t.Fatal(err)
	}
	s.stmts.line.setBudget(time.Hour)
	return s
}

// hold starts a transaction that inserts job id and then holds the writer
// until the function it returns is called; that function returns InTx's
// error.
func hold(t *testing.T, s *Store, id string) (release func() error) {
	t.Helper()
	ctx := t.Context()
	held, rel, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- s.InTx(ctx, func(q store.Querier) error {
			err := q.JobInsert(ctx, storetest.NewJob(id, storetest.Epoch()))
			close(held)
			<-rel
			return err
		})
	}()
	<-held
	return func() error {
		close(rel)
		return <-errc
	}
}

// waitQueued waits until n callers are in s's writer's line.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.stmts.line.queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers queued, want %d", s.stmts.line.queued(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// group queues the callers one after the other while the writer's turn is
// held outside any transaction, so that they run in this order and in one
// group once it is given back, and returns each caller's error.
func group(t *testing.T, s *Store, callers ...func() error) []error {
	t.Helper()
	release, err := s.stmts.takeTurn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(callers))
	var wg sync.WaitGroup
	for i, call := range callers {
		wg.Go(func() { errs[i] = call() })
		waitQueued(t, s, i+1)
	}
	release()
	wg.Wait()
	return errs
}

// insert returns a caller that inserts job id in a transaction.
func insert(s *Store, ctx context.Context, id string) func() error {
	return func() error {
		return s.InTx(ctx, func(q store.Querier) error {
			return q.JobInsert(ctx, storetest.NewJob(id, storetest.Epoch()))
		})
	}
}

// jobsPresent returns which of ids s holds, read on the read pool, which
// sees only what was committed.
func jobsPresent(t *testing.T, s *Store, ids ...string) []string {
	t.Helper()
	var got []string
	for _, id := range ids {
		_, err := s.JobGet(t.Context(), id)
		switch {
		case err == nil:
			got = append(got, id)
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("JobGet(%s): %v", id, err)
		}
	}
	return got
}

// TestGroupCommitSharesOneCommit checks that transactions queued together
// are committed by one COMMIT, counted in the write-ahead log, and are in
// the database when InTx returns, there to stay.
func TestGroupCommitSharesOneCommit(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	before := walCommits(t, s.path)
	const n = 16
	var callers []func() error
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("j%02d", i))
		callers = append(callers, insert(s, ctx, ids[i]))
	}
	// A write outside a transaction joins the group as well.
	callers = append(callers, func() error { return s.JobInsert(ctx, storetest.NewJob("method", storetest.Epoch())) })
	ids = append(ids, "method")
	for i, err := range group(t, s, callers...) {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := walCommits(t, s.path) - before; got != 1 {
		t.Errorf("%d commits for %d transactions queued together, want 1", got, n+1)
	}
	if got := jobsPresent(t, s, ids...); !slices.Equal(got, ids) {
		t.Errorf("jobs present after the calls returned = %v, want %v", got, ids)
	}

	// Durable: a store opened on the file once this one is closed finds them.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, s.path)
	if got := jobsPresent(t, s2, ids...); !slices.Equal(got, ids) {
		t.Errorf("jobs present after reopening = %v, want %v", got, ids)
	}
}

// TestGroupFailureUndoesOnlyItsOwn checks that a fn that fails in the
// middle of a group (an error of its own, a duplicate key, a panic,
// runtime.Goexit) has its writes undone, and only its: the others commit
// together, and its caller gets its error, or its panic, as it was.
func TestGroupFailureUndoesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	if err := s.JobInsert(ctx, storetest.NewJob("dup", storetest.Epoch())); err != nil {
		t.Fatal(err)
	}
	errOwn := errors.New("fn's own failure")
	// insertThen inserts job id, then runs then in the same transaction.
	insertThen := func(id string, then func(q store.Querier) error) func() error {
		return func() error {
			return s.InTx(ctx, func(q store.Querier) error {
				if err := q.JobInsert(ctx, storetest.NewJob(id, storetest.Epoch())); err != nil {
					return err
				}
				return then(q)
			})
		}
	}
	var panicked any
	goexited := true
	before := walCommits(t, s.path)
	errs := group(t, s,
		// The first to run, with nothing before it in the transaction.
		insertThen("failed-first", func(store.Querier) error { return errOwn }),
		insert(s, ctx, "a"),
		insertThen("failed", func(store.Querier) error { return errOwn }),
		insert(s, ctx, "b"),
		insertThen("before-dup", func(q store.Querier) error {
			return q.JobInsert(ctx, storetest.NewJob("dup", storetest.Epoch()))
		}),
		insert(s, ctx, "c"),
		func() error {
			defer func() { panicked = recover() }()
			return insertThen("panicked", func(store.Querier) error { panic("fn's panic") })()
		},
		insert(s, ctx, "d"),
		func() error {
			// runtime.Goexit (t.FailNow calls it) ends the goroutine
			// that called InTx, running its deferred calls.
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = insertThen("goexited", func(store.Querier) error { runtime.Goexit(); return nil })()
				goexited = false
			}()
			<-done
			return nil
		},
		insert(s, ctx, "e"),
	)
	for i, err := range errs {
		var want error
		switch i {
		case 0, 2:
			want = errOwn
		case 4:
			want = store.ErrDuplicate
		}
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("caller %d: %v, want %v", i, err, want)
		}
	}
	if panicked != "fn's panic" {
		t.Errorf("InTx's caller recovered %v, want fn's panic", panicked)
	}
	if !goexited {
		t.Error("InTx returned to a caller whose fn called runtime.Goexit")
	}
	if got := walCommits(t, s.path) - before; got != 1 {
		t.Errorf("%d commits for the group, want 1", got)
	}
	want := []string{"a", "b", "c", "d", "e"}
	if got := jobsPresent(t, s, "failed-first", "a", "failed", "b", "before-dup", "c", "panicked", "d", "goexited", "e"); !slices.Equal(got, want) {
		t.Errorf("jobs present = %v, want %v", got, want)
	}
	// The writer carries on.
	if err := insert(s, ctx, "after")(); err != nil {
		t.Errorf("InTx after the group: %v", err)
	}
}

// TestGroupStaleRetried checks that a fn that loses a race to a fn ahead
// of it in its group gets store.ErrStale, and that rerunning its InTx, as
// the engine does, succeeds; the others of the group commit.
func TestGroupStaleRetried(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	if err := s.JobInsert(ctx, storetest.NewJob("s", storetest.Epoch())); err != nil {
		t.Fatal(err)
	}
	// update sets job s's error to by: from a copy read inside the
	// transaction, or from stale, read before it.
	update := func(by string, stale *domain.Job) error {
		return s.InTx(ctx, func(q store.Querier) error {
			j := stale
			if j == nil {
				var err error
				if j, err = q.JobGet(ctx, "s"); err != nil {
					return err
				}
			}
			j.Error = by
			return q.JobUpdate(ctx, j)
		})
	}
	stale, err := s.JobGet(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var attempts []error
	errs := group(t, s,
		func() error { return update("first", nil) },
		func() error {
			j := stale // read before "first" updated the job
			for {
				err := update("second", j)
				attempts = append(attempts, err)
				if !errors.Is(err, store.ErrStale) || len(attempts) > 3 {
					return err
				}
				j = nil // rerun, reading inside the transaction
			}
		},
		insert(s, ctx, "after"),
	)
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if len(attempts) != 2 || !errors.Is(attempts[0], store.ErrStale) {
		t.Errorf("attempts of the stale caller = %v, want ErrStale then nil", attempts)
	}
	j, err := s.JobGet(ctx, "s")
	if err != nil || j.Error != "second" || j.Version != stale.Version+2 {
		t.Errorf("job s = %+v, %v; want error second at version %d", j, err, stale.Version+2)
	}
	if got := jobsPresent(t, s, "after"); len(got) != 1 {
		t.Error("job after missing")
	}
}

// TestGroupCancelledWhileQueued checks that a caller whose ctx ends while
// it waits in line returns at once with ctx's error and that its fn never
// runs, in a transaction or outside one.
func TestGroupCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	release := hold(t, s, "holder")
	cctx, cancel := context.WithCancel(ctx)
	ran := make(chan string, 2)
	errc := make(chan error, 2)
	go func() {
		errc <- s.InTx(cctx, func(q store.Querier) error {
			ran <- "InTx"
			return q.JobInsert(ctx, storetest.NewJob("cancelled", storetest.Epoch()))
		})
	}()
	waitQueued(t, s, 1)
	go func() { errc <- s.JobInsert(cctx, storetest.NewJob("cancelled-method", storetest.Epoch())) }()
	waitQueued(t, s, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := insert(s, ctx, "after")(); err != nil {
			t.Errorf("InTx queued behind the cancelled: %v", err)
		}
	})
	waitQueued(t, s, 3)
	cancel()
	for range 2 { // while the holder still holds the writer
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("a caller cancelled in line: %v, want context.Canceled", err)
		}
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(ran)
	for r := range ran {
		t.Errorf("the fn of a caller cancelled in line ran (%s)", r)
	}
	want := []string{"holder", "after"}
	if got := jobsPresent(t, s, "holder", "cancelled", "cancelled-method", "after"); !slices.Equal(got, want) {
		t.Errorf("jobs present = %v, want %v", got, want)
	}
}

// TestGroupInOrder checks that callers are served in the order they
// queued: transactions, writes outside one and turns at the connection
// itself (takeTurn) alike.
func TestGroupInOrder(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	var mu sync.Mutex
	var order []int
	record := func(i int) {
		mu.Lock()
		order = append(order, i)
		mu.Unlock()
	}
	var callers []func() error
	for i := range 12 {
		switch i % 4 {
		case 0, 1:
			callers = append(callers, func() error {
				return s.InTx(ctx, func(store.Querier) error { record(i); return nil })
			})
		case 2: // outside a transaction: the way of exec, queryRow and query there
			callers = append(callers, func() error {
				return s.querier.atomically(ctx, "", func(q *querier) error {
					record(i)
					_, err := q.exec(ctx, sqlWorkerDelete, 0) // deletes nothing
					return err
				})
			})
		case 3:
			callers = append(callers, func() error {
				release, err := s.stmts.takeTurn(ctx)
				if err != nil {
					return err
				}
				record(i)
				release()
				return nil
			})
		}
	}
	for i, err := range group(t, s, callers...) {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(order, want) {
		t.Errorf("callers served in the order %v, want %v", order, want)
	}
}

// TestGroupCommitFailureFailsAll checks that a COMMIT that fails fails
// every fn of its group, though each returned nil, and undoes their writes;
// and that the writer carries on. A foreign key checked at COMMIT
// (DEFERRABLE INITIALLY DEFERRED) makes it fail, and leaves the
// transaction open for the driver to roll back.
func TestGroupCommitFailureFailsAll(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	for _, stmt := range []string{
		`PRAGMA foreign_keys = ON`,
		`CREATE TABLE parents (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE children (parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := s.writer.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	orphan := func() error {
		return s.InTx(ctx, func(q store.Querier) error {
			_, err := q.(*querier).tx.ExecContext(ctx, `INSERT INTO children VALUES (1)`)
			return err
		})
	}
	errs := group(t, s, insert(s, ctx, "a"), orphan, insert(s, ctx, "b"))
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Errorf("caller %d of the group whose COMMIT failed: %v, want the COMMIT's error", i, err)
		}
	}
	if got := jobsPresent(t, s, "a", "b"); len(got) != 0 {
		t.Errorf("jobs present = %v, want none", got)
	}
	if err := insert(s, ctx, "after")(); err != nil {
		t.Errorf("InTx after a failed COMMIT: %v", err)
	}
	if got := jobsPresent(t, s, "after"); len(got) != 1 {
		t.Error("job after missing")
	}
}

// TestCloseFailsQueued checks that Close lets the transaction running
// finish and commit, fails those still queued without running them, and
// stops the writer (TestMain checks that no goroutine is left).
func TestCloseFailsQueued(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "scimesh.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	release := hold(t, s, "holder")
	ran := make(chan struct{}, 3)
	errc := make(chan error, 3)
	for i := range 3 {
		go func() {
			errc <- s.InTx(ctx, func(store.Querier) error { ran <- struct{}{}; return nil })
		}()
		waitQueued(t, s, i+1)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for !s.stmts.line.isClosed() {
		time.Sleep(100 * time.Microsecond)
	}
	if err := release(); err != nil {
		t.Errorf("the transaction running as Close was called: %v", err)
	}
	for range 3 {
		if err := <-errc; err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a caller queued as Close was called: %v, want the store closed", err)
		}
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.InTx(ctx, func(store.Querier) error { ran <- struct{}{}; return nil }); err == nil {
		t.Error("InTx after Close succeeded")
	}
	if len(ran) != 0 {
		t.Errorf("%d fns ran after Close", len(ran))
	}
	s = openStore(t, path)
	if got := jobsPresent(t, s, "holder"); len(got) != 1 {
		t.Error("the transaction running as Close was called did not commit")
	}
}

// TestGroupCancelledWhileRunning checks that a caller whose ctx ends while
// one of its statements runs does not take the group down with it: the
// statement finishes (SQLite would roll back the whole transaction for a
// write interrupted halfway), its fn then fails with ctx's error and is
// undone alone, and the others commit.
func TestGroupCancelledWhileRunning(t *testing.T) {
	t.Parallel()
	s := groupStore(t)
	ctx := t.Context()
	n := 100_000
	if raceEnabled {
		n = 5_000
	}
	_, err := s.writer.ExecContext(ctx, `INSERT INTO workers (id, first_seen, last_seen)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
SELECT 'w' || i, 0, 0 FROM n`, n)
	if err != nil {
		t.Fatal(err)
	}
	var deleted int64
	var during bool
	slow := func() error {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		return s.InTx(cctx, func(q store.Querier) error {
			timer := time.AfterFunc(time.Millisecond, cancel)
			defer timer.Stop()
			res, err := q.(*querier).exec(cctx, sqlWorkerDelete, 1) // every worker: a long statement
			during = cctx.Err() != nil                              // cancelled before it returned
			if err != nil {
				return err
			}
			deleted, _ = res.RowsAffected()
			_, err = q.JobGet(cctx, "a") // the next statement sees it
			return err
		})
	}
	errs := group(t, s, insert(s, ctx, "a"), slow, insert(s, ctx, "b"))
	if !during {
		t.Fatal("the statement ended before its ctx did; make it longer")
	}
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the others of the group: %v, %v; want nil", errs[0], errs[2])
	}
	if !errors.Is(errs[1], context.Canceled) {
		t.Errorf("the cancelled caller: %v, want context.Canceled", errs[1])
	}
	if deleted != int64(n) {
		t.Errorf("the statement running when ctx ended deleted %d workers, want all %d", deleted, n)
	}
	if got := jobsPresent(t, s, "a", "b"); len(got) != 2 {
		t.Errorf("jobs present = %v, want a and b", got)
	}
	var left int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM workers`).Scan(&left); err != nil || left != n {
		t.Errorf("%d workers, %v; want the %d the cancelled caller's delete left", left, err, n)
	}
}
