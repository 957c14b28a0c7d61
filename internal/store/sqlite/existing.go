package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNoDatabase reports a path that holds no SciMesh database.
var ErrNoDatabase = errors.New("sqlite: no SciMesh database")

// Whether a migration was applied, read without creating the table that
// records them.
const (
	sqlHasMigrations = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	sqlMigrationsAny = `SELECT count(*) FROM (SELECT 1 FROM schema_migrations LIMIT 1)`
)

// OpenExisting opens the SQLite database at path as Open does, but only a
// SciMesh database that is there: a missing file is ErrNoDatabase, and no
// file or directory is made; so is a file that holds no SciMesh schema (no
// migration applied), which is left as it was.
func OpenExisting(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: the path is empty", ErrNoDatabase)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: there is no such file", ErrNoDatabase, path)
	}
	if err != nil {
		return nil, translate(err, "open %s", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w at %s: it is not a file", ErrNoDatabase, path)
	}
	db, err := sql.Open("sqlite", path+"?_query_only=1")
	if err != nil {
		return nil, translate(err, "open %s", path)
	}
	var applied int
	err = db.QueryRowContext(ctx, sqlHasMigrations).Scan(&applied)
	if err == nil && applied > 0 {
		err = db.QueryRowContext(ctx, sqlMigrationsAny).Scan(&applied)
	}
	db.Close()
	if err != nil {
		return nil, translate(err, "read the schema of %s", path)
	}
	if applied == 0 {
		return nil, fmt.Errorf("%w at %s: the file holds no SciMesh schema (no migration applied)", ErrNoDatabase, path)
	}
	return Open(ctx, path)
}
