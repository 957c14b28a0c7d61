package sqlite

import (
	"context"
	"embed"
	"io/fs"
	"time"

	"github.com/scimesh/scimesh/internal/store/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the SQLite schema migrations, ordered by version.
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

// MigrateDB returns the store's database as a migrate.DB, for
// migrate.Up, Down and Status. Its bookkeeping table is schema_migrations.
func (s *Store) MigrateDB() migrate.DB { return migrator{s} }

// migrateUp applies every pending migration and prepares the store's
// statements on the schema it leaves.
func (s *Store) migrateUp(ctx context.Context, ms []migrate.Migration) error {
	if _, err := migrate.Up(ctx, s.MigrateDB(), ms); err != nil {
		return err
	}
	return s.warm(ctx)
}

// warm prepares on the writer every statement the store runs (the table
// statements), so that transactions never prepare one of their own (see
// querier.stmt).
func (s *Store) warm(ctx context.Context) error {
	for _, st := range statements {
		if _, err := s.stmts.get(ctx, st, true); err != nil {
			return translate(err, "prepare %q", st.query)
		}
	}
	return nil
}

// migrator runs migrations on the writer connection; its transactions
// begin IMMEDIATE and so exclude other migrators.
type migrator struct{ s *Store }

// The migrator's statements run on the writer directly, not through the
// statement cache: the schema they change is not there yet.
const (
	sqlMigrationsCreate = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`

	sqlMigrationsList = `SELECT version FROM schema_migrations ORDER BY version`

	sqlMigrationApplied = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`

	sqlMigrationRecord = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`

	sqlMigrationForget = `DELETE FROM schema_migrations WHERE version = ?`
)

// AppliedVersions returns the versions applied so far, creating the
// bookkeeping table when it does not exist.
func (m migrator) AppliedVersions(ctx context.Context) ([]int, error) {
	if _, err := m.s.writer.ExecContext(ctx, sqlMigrationsCreate); err != nil {
		return nil, translate(err, "create schema_migrations")
	}
	rows, err := m.s.writer.QueryContext(ctx, sqlMigrationsList)
	if err != nil {
		return nil, translate(err, "read schema_migrations")
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, translate(err, "read schema_migrations")
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "read schema_migrations")
	}
	return vs, nil
}

// Apply runs mg's Up (or Down) and records it in one transaction. It does
// nothing when another migrator got there first.
func (m migrator) Apply(ctx context.Context, mg migrate.Migration, up bool) error {
	tx, err := m.s.writer.BeginTx(ctx, nil)
	if err != nil {
		return translate(err, "begin")
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, sqlMigrationsCreate); err != nil {
		return translate(err, "create schema_migrations")
	}
	var applied bool
	if err := tx.QueryRowContext(ctx, sqlMigrationApplied, mg.Version).Scan(&applied); err != nil {
		return translate(err, "read schema_migrations")
	}
	if applied == up {
		return nil
	}
	body, record, args := mg.Down, sqlMigrationForget, []any{mg.Version}
	if up {
		body = mg.Up
		record = sqlMigrationRecord
		args = append(args, mg.Name, time.Now().UnixMicro())
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return translate(err, "run migration %04d_%s", mg.Version, mg.Name)
	}
	if _, err := tx.ExecContext(ctx, record, args...); err != nil {
		return translate(err, "record migration %04d_%s", mg.Version, mg.Name)
	}
	if err := tx.Commit(); err != nil {
		return translate(err, "commit migration %04d_%s", mg.Version, mg.Name)
	}
	return nil
}
