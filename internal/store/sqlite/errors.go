package sqlite

import (
	"database/sql"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/scimesh/scimesh/internal/store"
)

// translate is how an error leaves the store, once (store.Wrap), with
// the contract's sentinel for err.
func translate(err error, format string, args ...any) error {
	return store.Wrap("sqlite", sentinelOf(err), err, format, args...)
}

// sentinelOf is the contract's sentinel for err, or nil.
func sentinelOf(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_BUSY_SNAPSHOT:
		// A read transaction that lost the race to write: rerun it.
		return store.ErrStale
	case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
		return store.ErrUnavailable
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return store.ErrDuplicate
	}
	return nil
}
