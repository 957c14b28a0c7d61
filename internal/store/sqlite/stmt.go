package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// querier runs the contract's statements on the Store's pools (tx nil) or
// inside one transaction on the writer connection.
type querier struct {
	stmts *stmtCache
	tx    *sql.Tx // nil outside a transaction
	// bigWrite is set by writes large enough that the write-ahead log
	// should be checkpointed once they commit (see Store.checkpoint).
	bigWrite bool
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
		return nil, nil, mapErr(err)
	}
	return st, func() { _ = st.Close() }, nil
}

// exec runs a write statement.
func (q *querier) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, done, err := q.stmt(ctx, query, true)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := st.ExecContext(ctx, args...)
	return res, mapErr(err)
}

// queryRow runs a statement that returns at most one row and scans it with
// scan; no row is store.ErrNotFound. write says whether the statement writes.
func (q *querier) queryRow(ctx context.Context, write bool, scan func(scanner) error, query string, args ...any) error {
	st, done, err := q.stmt(ctx, query, write)
	if err != nil {
		return err
	}
	defer done()
	return mapErr(scan(st.QueryRowContext(ctx, args...)))
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
		return mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return mapErr(err)
		}
	}
	return mapErr(rows.Err())
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// Conversions between Go values and columns.

// timeArg is t as unix microseconds, or NULL for the zero time.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// timeCol reads a column written by timeArg.
func timeCol(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// blobArg is b, NULL when nil.
func blobArg(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// textArg is b as TEXT, NULL when nil.
func textArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// nullString is s, NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}
