package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scimesh/scimesh/internal/store"
)

// defaultMaxConns is the pool size when the URL has no pool_max_conns: pgx's
// own default (the number of CPUs, at least 4) starves a coordinator that
// serves many workers at once.
const defaultMaxConns = 16

// Store is the storage contract on a PostgreSQL database. Its Querier
// methods each run on their own; InTx groups them in a transaction. It is
// safe for concurrent use.
type Store struct {
	querier
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Option tunes Open.
type Option func(*pgxpool.Config)

// MaxConns sets the pool's size, over the URL's pool_max_conns; n of 0 or
// less changes nothing.
func MaxConns(n int) Option {
	return func(c *pgxpool.Config) {
		if n > 0 {
			c.MaxConns = int32(min(n, 1<<20))
		}
	}
}

// Open connects to the database at url (postgres://… or keyword/value
// form; pgxpool's pool_* parameters apply, pool_max_conns among them,
// default 16; jit is off unless the URL sets it) and checks that it
// answers. It does not migrate: see MigrateDB and CheckMigrated.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse database URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["jit"]; !ok {
		// The claim statements' estimates, over indexes filtered at
		// run time, pass jit_above_cost on some plans: each execution
		// then spends about 10 ms compiling what runs in under 1 ms.
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, translate(err, "open")
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, translate(err, "connect to %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	}
	s := &Store{querier: querier{db: pool, inserts: &insertCount{every: analyzeEvery}, fair: store.NewFairMemo()}, pool: pool}
	s.inserts.refresh = func() { s.querier.analyzeTasks(context.Background()) }
	return s, nil
}

// InTx runs fn in one READ COMMITTED transaction and commits it when fn
// returns nil; otherwise it rolls back and returns fn's error. It runs fn
// once: callers rerun the whole transaction on store.ErrStale.
func (s *Store) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate(err, "begin")
	}
	// Rollback after Commit is a no-op; this also covers a panicking fn.
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := &querier{db: tx, tx: tx, inserts: s.inserts, fair: s.fair}
	if err := fn(q); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return translate(err, "commit")
	}
	if q.analyze {
		s.querier.analyzeTasks(ctx)
	}
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return translate(err, "ping")
	}
	return nil
}

// Close releases the database's connections, waiting for those in use to be
// returned.
func (s *Store) Close() error {
	s.inserts.stop()
	s.pool.Close()
	return nil
}

// dbtx is what both the pool and a transaction offer.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error) // on a transaction: a savepoint
}

// atomically runs fn all or nothing: in a transaction of its own on the
// pool, or in a savepoint of the caller's transaction, which stays usable
// when fn fails. It is the one way a contract method that writes several
// statements keeps them together. Its errors, and fn's, come back
// untranslated, for the method to translate.
func (q *querier) atomically(ctx context.Context, fn func(db dbtx) error) error {
	var fnErr error
	err := pgx.BeginFunc(ctx, q.db, func(tx pgx.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if err != nil && err != fnErr {
		return fmt.Errorf("begin or commit: %w", err)
	}
	return err
}

// querier implements store.Querier on the pool (each call on its own) or on
// a transaction.
type querier struct {
	db dbtx
	tx pgx.Tx // the transaction db is, or nil on the pool
	// analyze asks InTx to refresh the tasks table's statistics after the
	// commit, because many tasks were inserted.
	analyze bool
	// inserts counts the tasks inserted since the last refresh; one per
	// Store, shared by its transactions.
	inserts *insertCount
	// fair is what fair claims remember between them
	// (store.ClaimFair); one per Store, shared by its transactions.
	fair *store.FairMemo
}
