package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/scimesh/scimesh/internal/store"
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
// It also keeps the writer's line (line, a committer): once the store is
// open (migrations and warm run before any caller), every use of the
// writer connection waits its turn there, and turns are given in the
// order they were asked for. database/sql hands a pool's free connection
// to a waiter picked at random, so behind a long run of transactions (a
// job of a million chunks created in batches) a heartbeat could wait out
// many of them; in line, it waits for those ahead of it only, and shares
// their commit.
type stmtCache struct {
	writer, reader *sql.DB
	line           *committer

	mu sync.RWMutex
	w  []*sql.Stmt // by statement.id
	r  []*sql.Stmt

	// fair is what fair claims remember between them (store.ClaimFair),
	// shared, as the statements are, by every querier of the store.
	fair *store.FairMemo
}

// newStmtCache returns an empty cache and starts the writer's line, which
// close stops.
func newStmtCache(writer, reader *sql.DB) *stmtCache {
	c := &stmtCache{writer: writer, reader: reader,
		w: make([]*sql.Stmt, len(statements)), r: make([]*sql.Stmt, len(statements)), fair: store.NewFairMemo()}
	c.line = newCommitter(writer, c)
	return c
}

// takeTurn waits for the writer connection's turn, in line with every
// other use of it, and returns the function that gives the turn back.
// While it is held no transaction is open on the connection.
func (c *stmtCache) takeTurn(ctx context.Context) (release func(), err error) {
	return c.line.takeTurn(ctx)
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

// checkpoint moves the write-ahead log into the database file and empties
// it. After a large insert (bigInsert tasks) the log holds hundreds of
// megabytes; left to the automatic checkpoint, copying them back would
// stall the first ordinary commit after it. Best effort: a checkpoint that
// fails is retried by the automatic ones. The caller holds the writer's
// turn (takeTurn), or is the committer between two groups.
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

// close stops the writer's line (see committer.close) and closes the
// prepared statements.
func (c *stmtCache) close() error {
	c.line.close()
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

// stmt returns st prepared: bound to the transaction when one is open,
// else on the read pool (the helpers below run a write outside a
// transaction in a transaction of its own, so that it shares the commit
// of those queued with it). Call done when finished with it.
//
// Inside a transaction a statement not prepared yet is prepared on the
// transaction alone: preparing it on the writer pool would wait for the one
// connection the transaction holds. Store.warm prepares every statement the
// store runs, so that happens only before the schema exists (OpenNoMigrate).
func (q *querier) stmt(ctx context.Context, query *statement) (st *sql.Stmt, done func(), err error) {
	if q.tx == nil {
		st, err = q.stmts.get(ctx, query, false)
		return st, func() {}, err
	}
	if st = q.stmts.cached(query); st != nil {
		st = q.tx.StmtContext(ctx, st)
	} else if st, err = q.tx.PrepareContext(ctx, query.query); err != nil {
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	return st, func() { _ = st.Close() }, nil
}

// txContext returns the context for a statement of q's: ctx itself
// outside a transaction; inside one, ctx's error when it has ended, else
// ctx without its cancellation. SQLite answers a statement interrupted
// halfway (which is what the driver does when its ctx ends) by rolling
// back the whole transaction when the statement writes, and the
// transaction is shared with other callers' (see committer): a caller's
// cancellation stops its fn at its next statement, never in the middle of
// one.
func (q *querier) txContext(ctx context.Context) (context.Context, error) {
	if q.tx == nil {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// The statement helpers return the database's errors as they are: the
// methods translate them once, naming what failed.

// exec runs a write statement.
func (q *querier) exec(ctx context.Context, query *statement, args ...any) (res sql.Result, err error) {
	if q.tx == nil {
		err = q.atomically(ctx, "", func(q *querier) error {
			res, err = q.exec(ctx, query, args...)
			return err
		})
		return res, err
	}
	if ctx, err = q.txContext(ctx); err != nil {
		return nil, err
	}
	st, done, err := q.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.ExecContext(ctx, args...)
}

// queryRow runs a statement that returns at most one row and scans it with
// scan; no row is sql.ErrNoRows. write says whether the statement writes.
func (q *querier) queryRow(ctx context.Context, write bool, scan func(scanner) error, query *statement, args ...any) error {
	found := false
	err := q.query(ctx, write, func(r scanner) error {
		if found {
			return nil
		}
		found = true
		return scan(r)
	}, query, args...)
	if err == nil && !found {
		return sql.ErrNoRows
	}
	return err
}

// query runs a statement and calls scan for each row it returns.
func (q *querier) query(ctx context.Context, write bool, scan func(scanner) error, query *statement, args ...any) (err error) {
	if q.tx == nil && write {
		return q.atomically(ctx, "", func(q *querier) error { return q.query(ctx, true, scan, query, args...) })
	}
	if ctx, err = q.txContext(ctx); err != nil {
		return err
	}
	st, done, err := q.stmt(ctx, query)
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
