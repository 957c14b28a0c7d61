package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
)

// TestTranslate pins the shape every error of the store has, as
// PostgreSQL's: "sqlite: what: sentinel: cause", the sentinel once.
func TestTranslate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		err      error
		sentinel error // nil: none
		msg      string
	}{
		{"no row", sql.ErrNoRows, store.ErrNotFound, "sqlite: get job j1: store: not found: sql: no rows in result set"},
		{"a sentinel of the store's own", store.ErrStale, store.ErrStale, "sqlite: get job j1: store: stale; rerun the transaction"},
		{"translated already", fmt.Errorf("step: %w: %w", store.ErrNotFound, sql.ErrNoRows), store.ErrNotFound,
			"sqlite: get job j1: step: store: not found: sql: no rows in result set"},
		{"context", context.Canceled, nil, "sqlite: get job j1: context canceled"},
		{"other", errors.New("boom"), nil, "sqlite: get job j1: boom"},
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
