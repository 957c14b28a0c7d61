package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
)

// TestWrap pins the shape every error of a store has: "driver: what:
// sentinel: cause", the sentinel once, both reachable with errors.Is.
func TestWrap(t *testing.T) {
	t.Parallel()
	cause := errors.New("no rows")
	for _, c := range []struct {
		name          string
		sentinel, err error
		want          error // the sentinel expected on the result; nil: none
		msg           string
	}{
		{"with a sentinel", store.ErrNotFound, cause, store.ErrNotFound, "db: get job j1: store: not found: no rows"},
		{"without", nil, cause, nil, "db: get job j1: no rows"},
		{"a sentinel of the store's own", store.ErrStale, store.ErrStale, store.ErrStale, "db: get job j1: store: stale; rerun the transaction"},
		{"translated already", store.ErrNotFound, fmt.Errorf("step: %w: %w", store.ErrNotFound, cause), store.ErrNotFound,
			"db: get job j1: step: store: not found: no rows"},
		{"context", store.ErrUnavailable, context.Canceled, nil, "db: get job j1: context canceled"},
	} {
		got := store.Wrap("db", c.sentinel, c.err, "get job %s", "j1")
		if got.Error() != c.msg {
			t.Errorf("%s: got %q, want %q", c.name, got, c.msg)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: %v does not wrap %v", c.name, got, c.err)
		}
		for _, s := range []error{store.ErrNotFound, store.ErrStale, store.ErrDuplicate, store.ErrUnavailable} {
			if errors.Is(got, s) != (s == c.want) {
				t.Errorf("%s: errors.Is(%v, %v) = %t", c.name, got, s, errors.Is(got, s))
			}
		}
	}
}
