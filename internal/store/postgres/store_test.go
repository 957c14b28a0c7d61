package postgres_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformance runs the storage contract's suite on a fresh database per
// subtest.
func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store { return open(t) })
}

// open returns a store on a fresh, migrated database, closed when t ends.
func open(t testing.TB) *postgres.Store {
	t.Helper()
	s, _ := openURL(t)
	return s
}

// openURL returns a store on a fresh, migrated database, closed when t
// ends, and the database's URL. Query parameters (e.g. pool_max_conns=40)
// are appended to the URL the store opens.
func openURL(t testing.TB, params ...string) (*postgres.Store, string) {
	t.Helper()
	url := pgtest.URL(t)
	storeURL := url
	for _, p := range params {
		switch {
		case !strings.Contains(storeURL, "://"): // keyword/value form
			storeURL += " " + p
		case strings.Contains(storeURL, "?"):
			storeURL += "&" + p
		default:
			storeURL += "?" + p
		}
	}
	s, err := postgres.Open(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

// TestCloseStopsGoroutines checks that a closed store leaves no goroutine
// behind. It is not parallel, so the other tests' goroutines are paused
// and ignored.
func TestCloseStopsGoroutines(t *testing.T) {
	url := pgtest.URL(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	err = s.InTx(ctx, func(q store.Querier) error {
		return q.JobInsert(ctx, storetest.NewJob("j1", storetest.Epoch()))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobList(ctx, &store.JobListParams{Limit: 10}); err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestJITOff checks that the store's connections run without JIT
// compilation unless the URL asks for it.
func TestJITOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		params []string
		want   string
	}{
		{nil, "off"},
		{[]string{"jit=on"}, "on"},
	} {
		s, _ := openURL(t, c.params...)
		got, err := s.Setting(t.Context(), "jit")
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("jit with %q = %s, want %s", c.params, got, c.want)
		}
	}
}
