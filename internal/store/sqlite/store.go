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
		return nil, translate(err, "migrate %s", path)
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
			return nil, translate(err, "open %s: create its directory", path)
		}
	}
	writer, err := sql.Open("sqlite", path+"?"+writerParams)
	if err != nil {
		return nil, translate(err, "open %s", path)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer connection switches the file to WAL mode; open it before
	// any reader so readers never see the file in another journal mode.
	if err := writer.PingContext(ctx); err != nil {
		_ = writer.Close()
		return nil, translate(err, "open %s", path)
	}
	reader, err := sql.Open("sqlite", path+"?"+readerParams)
	if err != nil {
		_ = writer.Close()
		return nil, translate(err, "open %s for reading", path)
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

// InTx runs fn in a transaction on the writer connection and returns once
// the transaction is committed when fn returns nil; otherwise fn's writes
// are undone and InTx returns fn's error as it is. The transaction holds
// SQLite's write lock from its first statement, so fn should be short.
//
// Transactions queued together share one: each fn runs in a savepoint of
// its own within it, in the order InTx was called, and one COMMIT ends
// them all (see committer). A fn's failure undoes its own writes only; a
// COMMIT that fails fails every fn it held. Inside fn, use only the
// Querier it is given: a write through the Store itself would wait behind
// the transaction fn is part of. A panic in fn (or runtime.Goexit) goes on
// up the caller's goroutine as it is; fn's writes are undone, and the
// others' are not.
func (s *Store) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	fnErr, txErr := s.stmts.line.run(ctx, func(q *querier) error { return fn(q) })
	switch {
	case fnErr != nil && txErr != nil:
		return errors.Join(fnErr, translate(txErr, "transaction"))
	case fnErr != nil:
		return fnErr
	case txErr != nil:
		return translate(txErr, "transaction")
	}
	return nil
}

// bigInsert is the number of tasks whose insertion calls for a checkpoint.
const bigInsert = 10_000

// Ping reports whether both the writer and a reader connection answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.reader.PingContext(ctx); err != nil {
		return translate(err, "ping")
	}
	release, err := s.stmts.takeTurn(ctx) // in line, like every use of the writer
	if err != nil {
		return translate(err, "ping")
	}
	defer release()
	if err := s.writer.PingContext(ctx); err != nil {
		return translate(err, "ping")
	}
	return nil
}

// Close stops the writer, closes the prepared statements and every
// connection. A transaction running finishes and commits; those still
// queued fail, as do the ones asked for afterwards.
func (s *Store) Close() error {
	return errors.Join(s.stmts.close(), s.reader.Close(), s.writer.Close())
}

// querier runs the contract's statements on the Store's pools (tx nil) or
// inside one transaction on the writer connection.
type querier struct {
	stmts *stmtCache
	tx    *sql.Tx // nil outside a transaction
	// bigWrite is set by writes large enough that the write-ahead log
	// should be checkpointed once they commit (see stmtCache.checkpoint).
	bigWrite bool
}

// atomically runs fn in a transaction outside one (queued with the
// others on the writer, see committer), and in a savepoint named name
// inside one, so that its statements apply all or none. It is the one way
// a contract method that writes several statements keeps them together.
// Its errors, and fn's, come back untranslated, for the method to
// translate.
func (q *querier) atomically(ctx context.Context, name string, fn func(q *querier) error) error {
	if q.tx == nil {
		fnErr, txErr := q.stmts.line.run(ctx, fn)
		if fnErr != nil && txErr != nil {
			return errors.Join(fnErr, txErr)
		} else if fnErr != nil {
			return fnErr
		}
		return txErr
	}
	sctx, err := q.txContext(ctx)
	if err != nil {
		return err
	}
	if _, err := q.tx.ExecContext(sctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(q); err != nil {
		// With sctx, so that fn's writes are undone even when ctx has
		// ended since.
		_, rerr := q.tx.ExecContext(sctx, "ROLLBACK TO "+name+"; RELEASE "+name)
		if rerr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rerr))
		}
		return err
	}
	if _, err := q.tx.ExecContext(sctx, "RELEASE "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}
