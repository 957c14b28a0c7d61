package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseAccounts: the migrated database holds the built-in admin; an
// account reads back as written, by name and in the list; a name is
// taken once; an update writes every setting but the name and creation
// time; tokens are found by hash, and revoking an account's tokens but
// one touches no other account's and counts what it revoked.
func exerciseAccounts(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	admin, err := s.AccountGet(ctx, domain.AdminAccount)
	if err != nil || !admin.Admin || admin.Disabled || admin.Weight != 1 || admin.CreatedAt.IsZero() {
		t.Fatalf("the built-in admin account: %+v, %v; want an enabled admin of weight 1", admin, err)
	}
	alice := &domain.Account{Name: "alice", Weight: 3, MaxRunning: 4, MaxJobs: 5, MaxStorage: 6 << 30,
		CreatedAt: Epoch(), UpdatedAt: Epoch()}
	if err := s.AccountInsert(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := s.AccountInsert(ctx, &domain.Account{Name: "alice", Weight: 1, CreatedAt: Epoch(), UpdatedAt: Epoch()}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second account alice: %v, want ErrDuplicate", err)
	}
	got, err := s.AccountGet(ctx, "alice")
	if err != nil || !reflect.DeepEqual(got, alice) {
		t.Errorf("AccountGet(alice) = %+v, %v; want %+v", got, err, alice)
	}
	if _, err := s.AccountGet(ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountGet(bob): %v, want ErrNotFound", err)
	}

	later := Epoch().Add(time.Hour)
	alice.Admin, alice.Disabled, alice.Weight, alice.MaxRunning, alice.MaxJobs, alice.MaxStorage, alice.UpdatedAt = true, true, 7, 0, 0, 0, later
	if err := s.AccountUpdate(ctx, &domain.Account{Name: "alice", Admin: true, Disabled: true, Weight: 7, CreatedAt: later, UpdatedAt: later}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AccountGet(ctx, "alice"); err != nil || !reflect.DeepEqual(got, alice) {
		t.Errorf("after AccountUpdate: %+v, %v; want %+v (its creation time kept)", got, err, alice)
	}
	if err := s.AccountUpdate(ctx, &domain.Account{Name: "bob", Weight: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountUpdate(bob): %v, want ErrNotFound", err)
	}
	list, err := s.AccountList(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "admin" || list[1].Name != "alice" {
		t.Errorf("AccountList: %v, %v; want admin and alice, by name", list, err)
	}

	tokens := []*store.AccountToken{
		{Hash: "h1", Account: "alice", CreatedAt: Epoch()},
		{Hash: "h2", Account: "alice", CreatedAt: Epoch()},
		{Hash: "h3", Account: "alice", CreatedAt: Epoch(), RevokedAt: Epoch()},
		{Hash: "h4", Account: "admin", CreatedAt: Epoch()},
	}
	for _, tk := range tokens {
		if err := s.AccountTokenInsert(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AccountTokenInsert(ctx, &store.AccountToken{Hash: "h1", Account: "admin", CreatedAt: Epoch()}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("a second token of hash h1: %v, want ErrDuplicate", err)
	}
	if got, err := s.AccountTokenGet(ctx, "h3"); err != nil || !reflect.DeepEqual(got, tokens[2]) {
		t.Errorf("AccountTokenGet(h3) = %+v, %v; want %+v", got, err, tokens[2])
	}
	if _, err := s.AccountTokenGet(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccountTokenGet(nope): %v, want ErrNotFound", err)
	}
	n, err := s.AccountTokenRevoke(ctx, &store.AccountTokenRevokeParams{Account: "alice", Keep: "h2", Now: later})
	if err != nil || n != 1 {
		t.Errorf("revoke alice's tokens but h2: %d, %v; want 1 (h3 was revoked already)", n, err)
	}
	for hash, revokedAt := range map[string]time.Time{"h1": later, "h2": {}, "h3": Epoch(), "h4": {}} {
		if got, err := s.AccountTokenGet(ctx, hash); err != nil || !got.RevokedAt.Equal(revokedAt) {
			t.Errorf("token %s after the revocation: %+v, %v; want revoked at %v (zero: valid)", hash, got, err, revokedAt)
		}
	}
}
