package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scimesh/scimesh/internal/store"
)

// TestTranslate pins the shape every error of the store has, as SQLite's:
// "postgres: what: sentinel: cause", the sentinel once.
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
		if got.Error() != c.msg {
			t.Errorf("%s: got %q, want %q", c.name, got, c.msg)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: %v does not wrap %v", c.name, got, c.err)
		}
		for _, s := range []error{store.ErrNotFound, store.ErrStale, store.ErrDuplicate, store.ErrUnavailable} {
			if errors.Is(got, s) != (s == c.sentinel) {
				t.Errorf("%s: errors.Is(%v, %v) = %t", c.name, got, s, errors.Is(got, s))
			}
		}
		if c.sentinel != nil && strings.Count(got.Error(), c.sentinel.Error()) != 1 {
			t.Errorf("%s: %q names its sentinel more than once", c.name, got)
		}
	}
}
