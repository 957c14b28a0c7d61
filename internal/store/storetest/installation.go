package storetest

import (
	"regexp"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
)

var installationIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

func exerciseInstallation(t *testing.T, newStore newFunc) {
	t.Run("OneRandomIDForEver", func(t *testing.T) {
		t.Parallel()
		a, b := newStore(t), newStore(t)
		ctx := t.Context()
		id, err := a.InstallationGet(ctx)
		if err != nil || !installationIDRe.MatchString(id) {
			t.Fatalf("InstallationGet = %q, %v; want 32 hex digits", id, err)
		}
		if again, err := a.InstallationGet(ctx); err != nil || again != id {
			t.Errorf("a second InstallationGet = %q, %v; want %q again", again, err, id)
		}
		err = a.InTx(ctx, func(q store.Querier) error {
			got, err := q.InstallationGet(ctx)
			if err == nil && got != id {
				t.Errorf("InstallationGet in a transaction = %q, want %q", got, id)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// Pinned: every database has its own.
		if other, err := b.InstallationGet(ctx); err != nil || other == id {
			t.Errorf("another database's InstallationGet = %q, %v; want an ID other than %q", other, err, id)
		}
	})
}
