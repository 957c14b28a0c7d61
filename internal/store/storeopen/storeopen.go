// Package storeopen opens what a coordinator keeps: the store a database
// URL names (sqlite:PATH or postgres://…), with its migrations, and the
// files under its data directory. It is the one place that picks a store
// driver by URL, for the server and the commands alike; the store package
// itself cannot, since the drivers import it.
package storeopen

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/sqlite"
)

// Options tune Open. The zero value opens an already migrated PostgreSQL
// database with the default pool.
type Options struct {
	// Migrate applies PostgreSQL's pending migrations before the store is
	// used. SQLite migrates itself whatever it says.
	Migrate bool
	// MaxConns is the PostgreSQL pool's size; 0 means the URL's
	// pool_max_conns, else 16. SQLite ignores it.
	MaxConns int
	// Existing opens only a SciMesh database that is there, for commands
	// that work on one: a SQLite file that is missing, or holds no
	// SciMesh schema, is refused rather than made one (see
	// sqlite.OpenExisting). PostgreSQL, never created by connecting, is
	// refused unmigrated anyway unless Migrate is set.
	Existing bool
}

// Open opens the database named by url. SQLite migrates itself;
// PostgreSQL is migrated only with opts.Migrate, and otherwise must
// already be (the error says how).
func Open(ctx context.Context, url string, opts Options) (store.Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("database %q names no file; use sqlite:PATH", url)
		}
		if opts.Existing {
			return sqlite.OpenExisting(ctx, path)
		}
		return sqlite.Open(ctx, path)
	case IsPostgres(url):
		s, err := postgres.Open(ctx, url, postgres.MaxConns(opts.MaxConns))
		if err != nil {
			return nil, err
		}
		if opts.Migrate {
			ms, err := postgres.Migrations()
			if err == nil {
				_, err = migrate.Up(ctx, s.MigrateDB(), ms)
			}
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("migrate database: %w", err)
			}
		}
		if err := s.CheckMigrated(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, unknown(url)
}

// Schema is a database opened for its migrations alone: to apply, revert
// or list them (migrate.Up, Down, Status), without migrating it first.
type Schema struct {
	DB         migrate.DB
	Migrations []migrate.Migration // the driver's, oldest first
	close      func() error
}

// OpenSchema opens the database named by url for its migrations. The
// caller must Close it.
func OpenSchema(ctx context.Context, url string) (*Schema, error) {
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		s, err := sqlite.OpenNoMigrate(ctx, strings.TrimPrefix(url, "sqlite:"))
		if err != nil {
			return nil, err
		}
		ms, err := sqlite.Migrations()
		if err != nil {
			s.Close()
			return nil, err
		}
		return &Schema{DB: s.MigrateDB(), Migrations: ms, close: s.Close}, nil
	case IsPostgres(url):
		s, err := postgres.Open(ctx, url)
		if err != nil {
			return nil, err
		}
		ms, err := postgres.Migrations()
		if err != nil {
			s.Close()
			return nil, err
		}
		return &Schema{DB: s.MigrateDB(), Migrations: ms, close: s.Close}, nil
	}
	return nil, unknown(url)
}

// Close closes the schema's database.
func (s *Schema) Close() error { return s.close() }

// IsPostgres reports whether url names a PostgreSQL database
// (postgres://… or postgresql://…): a server, which may be down for a
// while, where sqlite:PATH names a file.
func IsPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

func unknown(url string) error {
	return fmt.Errorf("database %q: use sqlite:PATH or postgres://USER@HOST/DB (set --db or DATABASE_URL)", Redact(url))
}

// Redact hides the password of a database URL, for logs and messages.
func Redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	creds, host, ok := strings.Cut(rest, "@")
	if !ok {
		return url
	}
	user, _, _ := strings.Cut(creds, ":")
	return scheme + "://" + user + ":***@" + host
}

// Blobs opens the blob store blobsURL names (s3://…, see blob.Open) or,
// when it is empty, the files of the data directory dataDir (its blobs
// directory), creating dataDir when needed.
func Blobs(ctx context.Context, blobsURL, dataDir string) (blob.Store, error) {
	if blobsURL == "" {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	return blob.Open(ctx, blobsURL, dataDir)
}
