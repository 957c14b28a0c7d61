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

// statement is one of the store's SQL statements. Each is declared once,
// as a package variable made by newStatement, which enters it in
// statements: the one table of what the store runs, which the querier's
// helpers take their statements from and Store.warm prepares at open. No
// list of them is kept by hand, and a statement cannot be run without
// being in it.
type statement struct {
	query string
	id    int // its place in statements, and in each pool's cache
}

// statements are every statement of the store, in the order declared.
// Package initialization fills it; it does not change afterwards.
var statements []*statement

// newStatement enters query in statements and returns it.
func newStatement(query string) *statement {
	st := &statement{query: query, id: len(statements)}
	statements = append(statements, st)
	return st
}

// stmtCache holds the statements prepared so far, one slot per statement
// and pool. A statement on the writer pool is bound to a transaction with
// Tx.StmtContext, which reuses the connection's prepared statement.
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
	w  []*sql.Stmt // by statement.id
	r  []*sql.Stmt
}

func newStmtCache(writer, reader *sql.DB) *stmtCache {
	return &stmtCache{writer: writer, reader: reader, turn: semaphore.NewWeighted(1),
		w: make([]*sql.Stmt, len(statements)), r: make([]*sql.Stmt, len(statements))}
}

// takeTurn waits for the writer connection's turn, in line with every
// other use of it, and returns the function that gives the turn back.
func (c *stmtCache) takeTurn(ctx context.Context) (release func(), err error) {
	if err := c.turn.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("wait for the writer: %w", err)
	}
	return func() { c.turn.Release(1) }, nil
}

// get returns st prepared on the writer (write) or the read pool,
// preparing it the first time.
func (c *stmtCache) get(ctx context.Context, st *statement, write bool) (*sql.Stmt, error) {
	m, db := c.r, c.reader
	if write {
		m, db = c.w, c.writer
	}
	c.mu.RLock()
	ps := m[st.id]
	c.mu.RUnlock()
	if ps != nil {
		return ps, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ps := m[st.id]; ps != nil {
		return ps, nil
	}
	ps, err := db.PrepareContext(ctx, st.query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	m[st.id] = ps
	return ps, nil
}

// checkpoint runs Store.checkpoint's statement on the writer; the caller
// holds the writer's turn.
func (c *stmtCache) checkpoint(ctx context.Context) {
	_, _ = c.writer.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
}

// cached returns st as prepared on the writer, or nil when it has not
// been prepared.
func (c *stmtCache) cached(st *statement) *sql.Stmt {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.w[st.id]
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range [][]*sql.Stmt{c.w, c.r} {
		for i, ps := range m {
			if ps != nil {
				errs = append(errs, ps.Close())
				m[i] = nil
			}
		}
	}
	return errors.Join(errs...)
}

// stmt returns st prepared: on the writer when write is set or a
// transaction is open (bound to that transaction), else on the read pool. Call done when finished with it: outside a transaction, a
// write statement holds the writer's turn until then.
//
// Inside a transaction a statement not prepared yet is prepared on the
// transaction alone: preparing it on the writer pool would wait for the one
// connection the transaction holds. Store.warm prepares every statement the
// store runs, so that happens only before the schema exists (OpenNoMigrate).
func (q *querier) stmt(ctx context.Context, query *statement, write bool) (st *sql.Stmt, done func(), err error) {
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
	} else if st, err = q.tx.PrepareContext(ctx, query.query); err != nil {
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	return st, func() { _ = st.Close() }, nil
}

// The statement helpers return the database's errors as they are: the
// methods translate them once, naming what failed.

// exec runs a write statement.
func (q *querier) exec(ctx context.Context, query *statement, args ...any) (sql.Result, error) {
	st, done, err := q.stmt(ctx, query, true)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.ExecContext(ctx, args...)
}

// queryRow runs a statement that returns at most one row and scans it with
// scan; no row is sql.ErrNoRows. write says whether the statement writes.
func (q *querier) queryRow(ctx context.Context, write bool, scan func(scanner) error, query *statement, args ...any) error {
	st, done, err := q.stmt(ctx, query, write)
	if err != nil {
		return err
	}
	defer done()
	return scan(st.QueryRowContext(ctx, args...))
}

// query runs a statement and calls scan for each row it returns.
func (q *querier) query(ctx context.Context, write bool, scan func(scanner) error, query *statement, args ...any) error {
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
