package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/scimesh/scimesh/internal/store"
)

// translate is how an error leaves the store, once: err wrapped in a
// message made of format and args after "sqlite: ", with the contract's
// sentinel for err in between when there is one. Both stay reachable with
// errors.Is and errors.As. Context errors get no sentinel, and an error
// that carries one already gets no second.
func translate(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if sentinel := sentinelOf(err); sentinel != nil && !errors.Is(err, sentinel) {
		return fmt.Errorf("sqlite: %s: %w: %w", msg, sentinel, err)
	}
	return fmt.Errorf("sqlite: %s: %w", msg, err)
}

// sentinelOf is the contract's sentinel for err, or nil.
func sentinelOf(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
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
