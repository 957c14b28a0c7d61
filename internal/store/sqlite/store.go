// Package sqlite implements the storage contract (store.Store) on SQLite with
// modernc.org/sqlite, a pure-Go driver: no cgo, one file on disk.
//
// SQLite lets one writer in at a time, so the store does not pretend
// otherwise: every write and every transaction runs on one connection, whose
// transactions begin IMMEDIATE (they take the write lock up front and never
// fail to upgrade a read lock halfway). Reads made outside a transaction run
// on a separate pool of read-only connections and, in WAL mode, neither wait
// for the writer nor hold it up. Statements are prepared once and reused.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A commit
// survives the process being killed (kill -9) at any point; after a power
// loss or an operating-system crash the last transactions before the failure
// may be rolled back, never half applied. synchronous=FULL would close that
// window at the cost of an fsync per commit.
//
// Times are stored as INTEGER microseconds since the Unix epoch (NULL for the
// zero time.Time) and read back in UTC.
//
// Several processes may open one file, but they take turns at its write lock:
// a statement waits up to busy_timeout (10 s) for another process's
// transaction, and a wait that runs out is store.ErrUnavailable. One process
// per file is the configuration the store is built for.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/scimesh/scimesh/internal/store"
)

// Connection settings. busy_timeout bounds how long a statement waits for a
// lock another process holds before it fails with store.ErrUnavailable.
const (
	writerParams = "_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate" +
		"&_pragma=cache_size(-4096)&_pragma=temp_store(MEMORY)&_pragma=journal_size_limit(67108864)&_pragma=mmap_size(1073741824)"
	readerParams = "_busy_timeout=10000&_query_only=1&_pragma=cache_size(-4096)&_pragma=temp_store(MEMORY)&_pragma=mmap_size(1073741824)"
)

// Store is the storage contract on one SQLite file. It is safe for
// concurrent use. Outside a transaction each method stands alone; InTx hands
// fn a Querier that runs everything in one transaction.
type Store struct {
	*querier // the Querier outside any transaction

	path   string
	writer *sql.DB // one connection: every write and every transaction
	reader *sql.DB // read-only connections for reads outside a transaction
	stmts  *stmtCache
}

var _ store.Store = (*Store)(nil)

// Open opens the SQLite database at path, creating the file and its
// directory when they do not exist, and applies every pending migration.
func Open(ctx context.Context, path string) (*Store, error) {
	s, err := OpenNoMigrate(ctx, path)
	if err != nil {
		return nil, err
	}
	ms, err := Migrations()
	if err == nil {
		err = s.migrateUp(ctx, ms)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}
	return s, nil
}

// OpenNoMigrate opens the SQLite database at path like Open but leaves its
// schema as it is, for tools that inspect or change the migrations
// themselves (see MigrateDB).
func OpenNoMigrate(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: name a database file by its path (not empty, :memory: or a file: URI)", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: open %s: create its directory: %w", path, err)
		}
	}
	writer, err := sql.Open("sqlite", path+"?"+writerParams)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer connection switches the file to WAL mode; open it before
	// any reader so readers never see the file in another journal mode.
	if err := writer.PingContext(ctx); err != nil {
		_ = writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapErr(err))
	}
	reader, err := sql.Open("sqlite", path+"?"+readerParams)
	if err != nil {
		_ = writer.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}
	n := min(max(runtime.GOMAXPROCS(0), 2), 8)
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	reader.SetConnMaxLifetime(0)
	reader.SetConnMaxIdleTime(0)
	s := &Store{path: path, writer: writer, reader: reader, stmts: newStmtCache(writer, reader)}
	s.querier = &querier{stmts: s.stmts}
	return s, nil
}

// Path is the file the store was opened on.
func (s *Store) Path() string { return s.path }

// InTx runs fn in one transaction on the writer connection and commits it
// when fn returns nil; otherwise it rolls back and returns fn's error as it
// is. The transaction holds SQLite's write lock from its first statement, so
// transactions run one at a time and fn should be short. Inside fn, use only
// the Querier it is given: a write through the Store itself would wait for
// the connection fn is holding.
func (s *Store) InTx(ctx context.Context, fn func(q store.Querier) error) (err error) {
	release, err := s.stmts.takeTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", mapErr(err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	q := &querier{stmts: s.stmts, tx: tx}
	if err := fn(q); err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("sqlite: rollback: %w", mapErr(rerr)))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", mapErr(err))
	}
	if q.bigWrite {
		s.checkpoint(ctx)
	}
	return nil
}

// bigInsert is the number of tasks whose insertion calls for a checkpoint.
const bigInsert = 10_000

// checkpoint moves the write-ahead log into the database file and empties
// it. After a large insert the log holds hundreds of megabytes; left to the
// automatic checkpoint, copying them back would stall the first ordinary
// commit after it. Best effort: a checkpoint that fails is retried by the
// automatic ones.
func (s *Store) checkpoint(ctx context.Context) { s.stmts.checkpoint(ctx) }

// Ping reports whether both the writer and a reader connection answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", mapErr(err))
	}
	if err := s.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", mapErr(err))
	}
	return nil
}

// Close closes the prepared statements and every connection.
func (s *Store) Close() error {
	return errors.Join(s.stmts.close(), s.reader.Close(), s.writer.Close())
}

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
		return nil, fmt.Errorf("sqlite: wait for the writer: %w", err)
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
		return nil, mapErr(err)
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

// mapErr translates the database's errors into the contract's sentinels,
// keeping the original in the chain.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_BUSY_SNAPSHOT:
		// A read transaction that lost the race to write: rerun it.
		return fmt.Errorf("%w: %w", store.ErrStale, err)
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", store.ErrDuplicate, err)
	}
	return err
}
