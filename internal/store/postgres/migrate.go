package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/store/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the schema migrations of the postgres store, oldest
// first.
func Migrations() ([]migrate.Migration, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, translate(err, "migrations")
	}
	ms, err := migrate.Load(sub)
	if err != nil {
		return nil, translate(err, "migrations")
	}
	return ms, nil
}

// ErrNotMigrated reports a database whose schema is missing or older or
// newer than this program's migrations.
var ErrNotMigrated = errors.New("postgres: database schema is not migrated")

// migrateLockKey is the pg_advisory_xact_lock key that makes migrators
// take turns; an arbitrary constant ("scimesh" in ASCII).
const migrateLockKey = 0x7363696d657368

const (
	sqlMigrateLock = `SELECT pg_advisory_xact_lock($1)`

	sqlMigrationsCreate = `CREATE TABLE IF NOT EXISTS scimesh_migrations (
	version    integer     PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

	sqlMigrationsExist = `SELECT to_regclass('scimesh_migrations') IS NOT NULL`

	sqlMigrationsList = `SELECT version FROM scimesh_migrations ORDER BY version`

	sqlMigrationApplied = `SELECT EXISTS (SELECT 1 FROM scimesh_migrations WHERE version = $1)`

	sqlMigrationRecord = `INSERT INTO scimesh_migrations (version, name) VALUES ($1, $2)`

	sqlMigrationForget = `DELETE FROM scimesh_migrations WHERE version = $1`
)

// MigrateDB returns the migrate.DB that applies migrations to s's
// database. Each of its calls runs in a transaction holding an advisory
// lock, and Apply skips a migration that another process applied (or
// reverted) meanwhile, so concurrent migrators are safe.
func (s *Store) MigrateDB() migrate.DB { return migrator{s} }

type migrator struct{ s *Store }

// AppliedVersions returns the applied versions, creating the bookkeeping
// table when it does not exist.
func (m migrator) AppliedVersions(ctx context.Context) ([]int, error) {
	var vs []int
	err := m.locked(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlMigrationsList)
		if err != nil {
			return err
		}
		vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	})
	return vs, err
}

// Apply runs mg's Up (or Down) and records it in one transaction, unless
// the database is already there.
func (m migrator) Apply(ctx context.Context, mg migrate.Migration, up bool) error {
	return m.locked(ctx, func(tx pgx.Tx) error {
		var applied bool
		if err := tx.QueryRow(ctx, sqlMigrationApplied, mg.Version).Scan(&applied); err != nil {
			return err
		}
		if applied == up {
			return nil // another migrator got here first
		}
		body, record, args := mg.Up, sqlMigrationRecord, []any{mg.Version, mg.Name}
		if !up {
			body, record, args = mg.Down, sqlMigrationForget, []any{mg.Version}
		}
		// Without arguments pgx uses the simple protocol, which runs a
		// file of several statements.
		if _, err := tx.Exec(ctx, body); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, record, args...)
		return err
	})
}

// locked runs fn in a transaction that holds the migration lock and has the
// bookkeeping table.
func (m migrator) locked(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, m.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlMigrateLock, int64(migrateLockKey)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlMigrationsCreate); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		return translate(err, "migrate")
	}
	return nil
}

// CheckMigrated returns nil when every migration of this program, and no
// other, is applied to the database; otherwise an ErrNotMigrated that says
// what to run. It reads only: it creates no table.
func (s *Store) CheckMigrated(ctx context.Context) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, sqlMigrationsExist).Scan(&exists); err != nil {
		return translate(err, "read schema version")
	}
	var applied []int
	if exists {
		rows, err := s.pool.Query(ctx, sqlMigrationsList)
		if err != nil {
			return translate(err, "read schema version")
		}
		if applied, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
			return translate(err, "read schema version")
		}
	}
	known := make([]int, len(ms))
	for i, m := range ms {
		known[i] = m.Version
	}
	for _, v := range applied {
		if !slices.Contains(known, v) {
			return fmt.Errorf("%w: it has migration %04d applied, which this program does not know; run a newer scimesh", ErrNotMigrated, v)
		}
	}
	var missing int
	for _, v := range known {
		if !slices.Contains(applied, v) {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%w: %d of %d migrations are not applied; run `scimesh migrate up` or start the server with `scimesh serve --migrate`",
			ErrNotMigrated, missing, len(known))
	}
	return nil
}
