package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
)

// TestTranslate pins which sentinel each database error gets; the shape
// of the message is store.Wrap's (TestWrap).
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
		if got.Error() != c.msg || !errors.Is(got, c.err) || c.sentinel != nil && !errors.Is(got, c.sentinel) {
			t.Errorf("%s: got %q (sentinel %v wanted), want %q", c.name, got, c.sentinel, c.msg)
		}
	}
}
