package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/scimesh/scimesh/internal/store"
)

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
