package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
)

// stmtCache holds the statements prepared so far, one set per pool. A
// statement on the writer pool is bound to a transaction with Tx.StmtContext,
// which reuses the connection's prepared statement.
//
// It also keeps the writer's line: every use of the writer connection
// takes its turn first (takeTurn), and turns are given in the order they
// were asked for. database/sql hands a pool's free connection to a waiter
// picked at random, so behind a long run of transactions (a job of a
// million chunks created in batches) a heartbeat could wait out many of
// them; in line, it waits for those ahead of it only.
type stmtCache struct {
	writer, reader *sql.DB
	turn           *semaphore.Weighted // of weight 1; FIFO

	mu sync.RWMutex
	w  map[string]*sql.Stmt
	r  map[string]*sql.Stmt
}

func newStmtCache(writer, reader *sql.DB) *stmtCache {
	return &stmtCache{writer: writer, reader: reader, turn: semaphore.NewWeighted(1), w: map[string]*sql.Stmt{}, r: map[string]*sql.Stmt{}}
}

// takeTurn waits for the writer connection's turn, in line with every
// other use of it, and returns the function that gives the turn back.
func (c *stmtCache) takeTurn(ctx context.Context) (release func(), err error) {
	if err := c.turn.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("wait for the writer: %w", err)
	}
	return func() { c.turn.Release(1) }, nil
}

func (c *stmtCache) get(ctx context.Context, query string, write bool) (*sql.Stmt, error) {
	m, db := c.r, c.reader
	if write {
		m, db = c.w, c.writer
	}
	c.mu.RLock()
	st := m[query]
	c.mu.RUnlock()
	if st != nil {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := m[query]; st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	m[query] = st
	return st, nil
}

// checkpoint runs Store.checkpoint's statement on the writer; the caller
// holds the writer's turn.
func (c *stmtCache) checkpoint(ctx context.Context) {
	_, _ = c.writer.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
}

// cached returns the writer's statement for query, or nil when it has not
// been prepared.
func (c *stmtCache) cached(query string) *sql.Stmt {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.w[query]
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range []map[string]*sql.Stmt{c.w, c.r} {
		for q, st := range m {
			errs = append(errs, st.Close())
			delete(m, q)
		}
	}
	return errors.Join(errs...)
}

// stmt returns the prepared statement for query: on the writer when write
// is set or a transaction is open (bound to that transaction), else on the
// read pool. Call done when finished with it: outside a transaction, a
// write statement holds the writer's turn until then.
//
// Inside a transaction a statement not prepared yet is prepared on the
// transaction alone: preparing it on the writer pool would wait for the one
// connection the transaction holds. Store.warm prepares every statement the
// store runs, so that happens only before the schema exists.
func (q *querier) stmt(ctx context.Context, query string, write bool) (st *sql.Stmt, done func(), err error) {
	if q.tx == nil && !write {
		st, err = q.stmts.get(ctx, query, false)
		return st, func() {}, err
	}
	if q.tx == nil {
		release, err := q.stmts.takeTurn(ctx)
		if err != nil {
			return nil, nil, err
		}
		if st, err = q.stmts.get(ctx, query, true); err != nil {
			release()
			return nil, nil, err
		}
		return st, release, nil
	}
	if st = q.stmts.cached(query); st != nil {
		st = q.tx.StmtContext(ctx, st)
	} else if st, err = q.tx.PrepareContext(ctx, query); err != nil {
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	return st, func() { _ = st.Close() }, nil
}

// The statement helpers return the database's errors as they are: the
// methods translate them once, naming what failed.

// exec runs a write statement.
func (q *querier) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, done, err := q.stmt(ctx, query, true)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.ExecContext(ctx, args...)
}

// queryRow runs a statement that returns at most one row and scans it with
// scan; no row is sql.ErrNoRows. write says whether the statement writes.
func (q *querier) queryRow(ctx context.Context, write bool, scan func(scanner) error, query string, args ...any) error {
	st, done, err := q.stmt(ctx, query, write)
	if err != nil {
		return err
	}
	defer done()
	return scan(st.QueryRowContext(ctx, args...))
}

// query runs a statement and calls scan for each row it returns.
func (q *querier) query(ctx context.Context, write bool, scan func(scanner) error, query string, args ...any) error {
	st, done, err := q.stmt(ctx, query, write)
	if err != nil {
		return err
	}
	defer done()
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
