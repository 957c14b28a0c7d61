package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scimesh/scimesh/internal/store"
)

// TestTranslate pins which sentinel each database error gets; the shape
// of the message is store.Wrap's (TestWrap).
func TestTranslate(t *testing.T) {
	t.Parallel()
	unique := &pgconn.PgError{Severity: "ERROR", Code: codeUniqueViolation, Message: "duplicate key value"}
	for _, c := range []struct {
		name     string
		err      error
		sentinel error // nil: none
		msg      string
	}{
		{"no row", pgx.ErrNoRows, store.ErrNotFound, "postgres: get job j1: store: not found: no rows in result set"},
		{"unique violation", unique, store.ErrDuplicate, "postgres: get job j1: store: duplicate key: ERROR: duplicate key value (SQLSTATE 23505)"},
		{"a sentinel of the store's own", store.ErrStale, store.ErrStale, "postgres: get job j1: store: stale; rerun the transaction"},
		{"translated already", fmt.Errorf("step: %w: %w", store.ErrNotFound, pgx.ErrNoRows), store.ErrNotFound,
			"postgres: get job j1: step: store: not found: no rows in result set"},
		{"context", context.Canceled, nil, "postgres: get job j1: context canceled"},
		{"other", errors.New("boom"), nil, "postgres: get job j1: boom"},
	} {
		got := translate(c.err, "get job %s", "j1")
		if got.Error() != c.msg || !errors.Is(got, c.err) || c.sentinel != nil && !errors.Is(got, c.sentinel) {
			t.Errorf("%s: got %q (sentinel %v wanted), want %q", c.name, got, c.sentinel, c.msg)
		}
	}
}
