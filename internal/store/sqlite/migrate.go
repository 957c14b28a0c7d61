package sqlite

import (
	"context"
	"embed"
	"fmt"
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
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	ms, err := migrate.Load(sub)
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
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

// warm prepares on the writer every statement the store runs, so that
// transactions never prepare one of their own (see querier.stmt).
func (s *Store) warm(ctx context.Context) error {
	queries := []string{jobInsertSQL, jobGetSQL, jobByKeySQL, jobExistsSQL, jobUpdateSQL, jobMarkRunningSQL,
		taskCountByJobSQL, taskGetSQL, taskExistsSQL, taskUpdateSQL, taskListExpiredSQL, taskCancelJobSQL,
		taskDecrementUpstreamsSQL, taskResultListSQL, taskClaimCandidatesSQL, taskClaimWorkloadCandidatesSQL, taskClaimRowsSQL,
		taskClaimStitchSQL, taskRunnableSQL, jobResultReadSQL, jobUpdateCreationSQL, jobListAbandonedSQL, jobAbandonSQL,
		abandonedLogsDeleteSQL, abandonedTasksDeleteSQL, abandonedJobDeleteSQL,
		uploadInsertSQL, uploadGetSQL, taskLogCountSQL, taskLogInsertSQL, taskLogListSQL,
		taskArgInsertSQL, taskArgListSQL, taskArgResolveSQL, taskArgListRefsSQL,
		outboxInsertSQL, outboxClaimSQL, outboxUpdateSQL, outboxDeleteSQL, outboxGetStatsSQL,
		taskCountFinishedSQL, taskCountByStateSQL, taskListRootsSQL, workerUpsertSQL, workerListSQL, workerDeleteSQL}
	for _, q := range jobListSQLs {
		queries = append(queries, q[:]...)
	}
	queries = append(queries, taskListSQLs[:]...)
	queries = append(queries, retentionSQLs...)
	for _, q := range taskInsertSQLs {
		queries = append(queries, q)
	}
	for _, q := range queries {
		if _, err := s.stmts.get(ctx, q, true); err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
	}
	return nil
}

// migrator runs migrations on the writer connection; its transactions
// begin IMMEDIATE and so exclude other migrators.
type migrator struct{ s *Store }

const migrationsTableSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`

// AppliedVersions returns the versions applied so far, creating the
// bookkeeping table when it does not exist.
func (m migrator) AppliedVersions(ctx context.Context) ([]int, error) {
	if _, err := m.s.writer.ExecContext(ctx, migrationsTableSQL); err != nil {
		return nil, fmt.Errorf("sqlite: create schema_migrations: %w", mapErr(err))
	}
	rows, err := m.s.writer.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", mapErr(err))
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", mapErr(err))
	}
	return vs, nil
}

// Apply runs mg's Up (or Down) and records it in one transaction. It does
// nothing when another migrator got there first.
func (m migrator) Apply(ctx context.Context, mg migrate.Migration, up bool) error {
	tx, err := m.s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", mapErr(err))
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, migrationsTableSQL); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", mapErr(err))
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, mg.Version).Scan(&n); err != nil {
		return fmt.Errorf("sqlite: read schema_migrations: %w", mapErr(err))
	}
	if applied := n > 0; applied == up {
		return nil
	}
	body, record, args := mg.Down, `DELETE FROM schema_migrations WHERE version = ?`, []any{mg.Version}
	if up {
		body = mg.Up
		record = `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`
		args = append(args, mg.Name, time.Now().UnixMicro())
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return fmt.Errorf("sqlite: run migration %04d_%s: %w", mg.Version, mg.Name, mapErr(err))
	}
	if _, err := tx.ExecContext(ctx, record, args...); err != nil {
		return fmt.Errorf("sqlite: record migration %04d_%s: %w", mg.Version, mg.Name, mapErr(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit migration %04d_%s: %w", mg.Version, mg.Name, mapErr(err))
	}
	return nil
}
