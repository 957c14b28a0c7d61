package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Group limits: a group takes at most maxGroup transactions, and takes no
// more once its own has been open for groupBudget, so that the first of
// them waits for its commit about that long at most, plus the fn running
// then: a fn that runs long (a job's tasks inserted in one transaction)
// holds the commit of those before it in its group, where alone it held
// back only those behind it.
const (
	maxGroup    = 256
	groupBudget = 5 * time.Millisecond
)

// committer is the goroutine that owns the writer connection's
// transactions, and commits many callers' write transactions at once
// (group commit).
//
// Callers queue in the order they ask (run, takeTurn). While one group
// runs, others queue; the committer takes the transactions at the head of
// the line, and those that join it while the group runs (see the limits
// above), in one SQLite transaction (BEGIN IMMEDIATE): it runs each
// caller's fn in turn, inside a savepoint of its own, and commits once,
// one WAL append for all of them where each used to pay its own. A fn that
// fails is rolled back to its savepoint, so that its writes alone are
// undone; the others commit. A caller learns that its fn's writes are in
// the database only once the COMMIT holding them succeeded, and a COMMIT
// that fails fails every fn of the group. A caller whose fn failed learns
// of it at the same moment, not before: it may have failed on what an
// earlier fn of the group wrote (a duplicate key), and reads that on the
// read pool next. Durability is SQLite's: WAL
// mode, synchronous=NORMAL, as before.
//
// fn runs in its caller's goroutine, on the committer's transaction, while
// the committer waits for it: the ctx fn uses is its caller's, a panic
// unwinds the caller's goroutine with its own stack and value (as does
// runtime.Goexit, which t.FailNow calls), and the committer, told that fn
// did not return, rolls back to fn's savepoint and carries on with the
// others. Nothing is recovered.
//
// A caller whose ctx ends while it is queued leaves the line without its
// fn being run. Once fn has been handed the transaction it runs to the
// end; each of its statements fails with ctx's error when ctx has ended
// before it starts, but is not interrupted once started (see
// querier.txContext), since SQLite answers a write interrupted halfway by
// rolling back the whole transaction, the others' writes with it.
type committer struct {
	db    *sql.DB // the writer pool: one connection
	stmts *stmtCache

	mu     sync.Mutex
	queue  []*member // in the order they asked
	closed bool
	budget time.Duration // groupBudget, but for tests

	wake chan struct{} // capacity 1: the queue gained a member, or close was called
	done chan struct{} // closed when the goroutine has returned
}

// A member is a caller in the committer's queue: a write transaction (run)
// or a turn at the connection itself, outside any transaction (takeTurn).
type member struct {
	ctx       context.Context
	exclusive bool         // takeTurn's
	state     atomic.Int32 // memberQueued, then memberTaken or memberLeft

	// The committer hands over its transaction (nil for an exclusive
	// turn) on turn, or answers without doing so. The caller says on ret
	// how fn went or, for an exclusive turn, that it is done.
	turn   chan *sql.Tx
	answer chan error // nil once the transaction holding fn's writes committed
	ret    chan outcome
}

// A member's state is decided once: the committer takes it (to run it, or
// to answer it with an error), or its caller leaves first.
const (
	memberQueued int32 = iota
	memberTaken
	memberLeft
)

// outcome is how a member's fn went.
type outcome struct {
	failed   bool // fn returned an error, panicked or called runtime.Goexit
	bigWrite bool // the write-ahead log wants a checkpoint (querier.bigWrite)
}

// errClosed is the answer to callers that queue after Close, or were
// still queued when it was called.
var errClosed = errors.New("wait for the writer: the store is closed")

func newCommitter(db *sql.DB, stmts *stmtCache) *committer {
	c := &committer{db: db, stmts: stmts, budget: groupBudget, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// run queues fn, waits for its turn and runs it in a transaction shared
// with the other callers queued with it. It returns fn's error as fn
// returned it (its writes are then undone), and txErr: the writer's own
// failure, untranslated (waiting, beginning, rolling back to fn's
// savepoint or committing), or nil once fn's writes are committed.
func (c *committer) run(ctx context.Context, fn func(q *querier) error) (fnErr, txErr error) {
	m, err := c.enqueue(ctx, false)
	if err != nil {
		return nil, err
	}
	tx, err := m.wait()
	if err != nil {
		return nil, err
	}
	q := &querier{stmts: c.stmts, tx: tx}
	returned := false
	defer func() {
		if !returned {
			// fn panicked or called runtime.Goexit: the committer undoes
			// its writes and carries on, while this goroutine unwinds.
			m.ret <- outcome{failed: true}
		}
	}()
	fnErr = fn(q)
	returned = true
	m.ret <- outcome{failed: fnErr != nil, bigWrite: q.bigWrite}
	return fnErr, <-m.answer
}

// takeTurn waits for the connection's turn, in line with every other use
// of it, and returns the function that gives the turn back. Between the
// two, no transaction is open on it.
func (c *committer) takeTurn(ctx context.Context) (release func(), err error) {
	m, err := c.enqueue(ctx, true)
	if err == nil {
		_, err = m.wait()
	}
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { m.ret <- outcome{} }) }, nil
}

func (c *committer) enqueue(ctx context.Context, exclusive bool) (*member, error) {
	m := &member{ctx: ctx, exclusive: exclusive,
		turn: make(chan *sql.Tx, 1), answer: make(chan error, 1), ret: make(chan outcome, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	c.queue = append(c.queue, m)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return m, nil
}

// wait waits for the committer to hand m the transaction (nil for an
// exclusive turn) or to answer it, or for m's ctx to end first.
func (m *member) wait() (*sql.Tx, error) {
	select {
	case tx := <-m.turn:
		return tx, nil
	case err := <-m.answer:
		return nil, err
	case <-m.ctx.Done():
		if m.state.CompareAndSwap(memberQueued, memberLeft) {
			return nil, fmt.Errorf("wait for the writer: %w", m.ctx.Err())
		}
	}
	// The committer took m as ctx ended: it is running or answered.
	select {
	case tx := <-m.turn:
		return tx, nil
	case err := <-m.answer:
		return nil, err
	}
}

// take decides m's fate for the committer: false when its caller has left
// or its ctx has ended (it is then answered), true when it is the
// committer's to run.
func (m *member) take() bool {
	if err := m.ctx.Err(); err != nil {
		m.refuse(fmt.Errorf("wait for the writer: %w", err))
		return false
	}
	return m.state.CompareAndSwap(memberQueued, memberTaken)
}

// refuse answers m with err instead of running it, unless its caller has
// left.
func (m *member) refuse(err error) {
	if m.state.CompareAndSwap(memberQueued, memberTaken) {
		m.answer <- err
	}
}

// close stops taking members: the group running finishes the fn running
// now and commits, every caller still queued is answered errClosed, and
// the goroutine returns before close does.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		if c.closed {
			left := c.queue
			c.queue = nil
			c.mu.Unlock()
			for _, m := range left {
				m.refuse(errClosed)
			}
			return
		}
		head, budget := c.queue[0], c.budget
		c.mu.Unlock()
		if head.exclusive {
			c.exclusive()
		} else {
			c.group(budget)
		}
	}
}

// pop removes the head of the queue and returns it, or returns nil when
// the queue is empty, Close was called or, unless exclusive, the head is
// an exclusive turn: a group ends before one.
func (c *committer) pop(exclusive bool) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 || c.closed || c.queue[0].exclusive != exclusive {
		return nil
	}
	m := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	return m
}

// exclusive gives the head of the queue, an exclusive turn, the
// connection, and waits for it back.
func (c *committer) exclusive() {
	m := c.pop(true)
	if m == nil || !m.take() {
		return
	}
	m.turn <- nil
	<-m.ret
}

// The committer's statements around each fn. They are in the statement
// table, prepared once, like the others.
var (
	sqlSavepoint  = newStatement(`SAVEPOINT member`)
	sqlRelease    = newStatement(`RELEASE member`)
	sqlRollbackTo = newStatement(`ROLLBACK TO member`)
)

// background is the context of the committer's own statements: BEGIN,
// the savepoints and COMMIT belong to the group, not to any one caller.
var background = context.Background()

// group runs one group in one transaction: the members at the head of
// the queue, and those that queue while it runs, until the queue is empty,
// an exclusive turn is at its head, or the group is full (maxGroup, or
// open for budget).
func (c *committer) group(budget time.Duration) {
	tx, err := c.db.BeginTx(background, nil)
	if err != nil {
		// Every member queued would try the same BEGIN.
		err = fmt.Errorf("begin: %w", err)
		for m := c.pop(false); m != nil; m = c.pop(false) {
			m.refuse(err)
		}
		return
	}
	start := time.Now()
	own := &querier{stmts: c.stmts, tx: tx} // for the savepoints
	var (
		done   []*member // ran and released: answered once COMMIT has gone one way or the other
		failed []*member // ran and rolled back: answered (nil; run returns fn's own error) with the others
		broken error     // the transaction is no longer the group's
		big    bool
	)
	// A failed fn may have failed because of what one before it in the
	// group wrote (a duplicate key): its caller hears of it only once
	// those writes are committed, so that it can read them on the pool.
	answerFailed := func() {
		for _, m := range failed {
			m.answer <- nil
		}
	}
	for n := 0; n < maxGroup && broken == nil && !big; {
		if n > 0 && time.Since(start) > budget {
			break
		}
		m := c.pop(false)
		if m == nil {
			break
		}
		if !m.take() {
			continue
		}
		n++
		// Even the first to run has a savepoint, though rolling back the
		// transaction would do as well, for the check that RELEASE makes.
		if _, err := own.exec(background, sqlSavepoint); err != nil {
			broken = fmt.Errorf("savepoint: %w", err)
			m.answer <- broken
			break
		}
		m.turn <- tx
		out := <-m.ret
		if !out.failed {
			// RELEASE fails only when the savepoint is gone: something in
			// fn ended the whole transaction (an I/O error, a full disk,
			// an interrupted write), and the others' writes with it. The
			// statements fn ran after that, outside the transaction, are
			// its own affair; the others' must not follow them.
			if _, err := own.exec(background, sqlRelease); err != nil {
				broken = fmt.Errorf("release savepoint: %w", err)
				m.answer <- broken
				break
			}
			done, big = append(done, m), out.bigWrite
			continue
		}
		_, err := own.exec(background, sqlRollbackTo)
		if err == nil {
			_, err = own.exec(background, sqlRelease)
		}
		if err != nil {
			broken = fmt.Errorf("roll back to savepoint: %w", err)
			m.answer <- broken
			break
		}
		failed = append(failed, m)
	}
	if broken != nil {
		_ = tx.Rollback()
		for _, m := range done {
			m.answer <- fmt.Errorf("transaction rolled back: %w", broken)
		}
		answerFailed()
		return
	}
	if len(done) == 0 {
		_ = tx.Rollback()
		answerFailed()
		return
	}
	if err := tx.Commit(); err != nil {
		// A COMMIT that fails can leave the transaction open (a deferred
		// foreign key still violated does); the driver rolls it back then.
		err = fmt.Errorf("commit: %w", err)
		for _, m := range done {
			m.answer <- err
		}
		answerFailed()
		return
	}
	for _, m := range done {
		m.answer <- nil
	}
	answerFailed()
	// The callers just answered are runnable, but would wait behind this
	// goroutine's next group and miss it, as each handoff to a member puts
	// the two of them next in the run queue: let them queue first. (Without
	// it, 64 goroutines writing back to back make groups of four or five,
	// and commit half as many transactions; see bench/NOTES.md.)
	runtime.Gosched()
	if big {
		c.stmts.checkpoint(background)
	}
}
