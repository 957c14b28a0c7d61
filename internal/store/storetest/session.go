package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseSessions: a recorded session is live until it expires or is
// deleted, in every connection of the store, and acts as its account; it
// ends when its account is disabled or the token it was started with is
// revoked. Expired ones are deleted in one call that counts them.
func exerciseSessions(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	now := Epoch()
	ada := &domain.Account{Name: "ada", Weight: 1, CreatedAt: now, UpdatedAt: now}
	if err := s.AccountInsert(ctx, ada); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"h1", "h2"} {
		if err := s.AccountTokenInsert(ctx, &store.AccountToken{Hash: h, Account: "ada", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	caller := func(id string, at time.Time) (domain.Caller, bool) {
		t.Helper()
		c, err := s.SessionLive(ctx, id, at)
		if errors.Is(err, store.ErrNotFound) {
			return c, false
		}
		if err != nil {
			t.Fatalf("SessionLive(%s): %v", id, err)
		}
		return c, true
	}
	live := func(id string, at time.Time) bool { t.Helper(); _, ok := caller(id, at); return ok }
	for _, ss := range []store.Session{
		{ID: "a", Account: domain.AdminAccount, ExpiresAt: now.Add(time.Hour)},
		{ID: "b", Account: domain.AdminAccount, ExpiresAt: now.Add(time.Minute)},
		{ID: "c", Account: domain.AdminAccount, ExpiresAt: now.Add(-time.Second)},
		{ID: "ada1", Account: "ada", TokenHash: "h1", ExpiresAt: now.Add(time.Hour)},
		{ID: "ada2", Account: "ada", TokenHash: "h2", ExpiresAt: now.Add(time.Hour)},
		{ID: "forged", Account: "ada", TokenHash: "no-such-token", ExpiresAt: now.Add(time.Hour)},
	} {
		if err := s.SessionInsert(ctx, &ss); err != nil {
			t.Fatalf("SessionInsert(%s): %v", ss.ID, err)
		}
	}
	if !live("a", now) || !live("b", now) || !live("b", now.Add(time.Minute)) {
		t.Error("a session before its expiry is not live")
	}
	if c, _ := caller("a", now); c != (domain.Caller{Account: domain.AdminAccount, Admin: true}) {
		t.Errorf("the client token's session acts as %+v, want the admin", c)
	}
	if c, ok := caller("ada1", now); !ok || c != (domain.Caller{Account: "ada"}) {
		t.Errorf("ada's session acts as %+v (live %v), want ada", c, ok)
	}
	if live("c", now) || live("b", now.Add(time.Minute+time.Microsecond)) {
		t.Error("a session past its expiry is live")
	}
	if live("nobody", now) || live("forged", now) {
		t.Error("a session never recorded, or started with no token of its account, is live")
	}
	// In a transaction too: the dashboard reads it anywhere.
	if err := s.InTx(ctx, func(q store.Querier) error {
		if _, err := q.SessionLive(ctx, "a", now); err != nil {
			t.Errorf("SessionLive in a transaction: %v; want live", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Revoking a token ends the sessions started with it, not the others.
	if _, err := s.AccountTokenRevoke(ctx, &store.AccountTokenRevokeParams{Account: "ada", Keep: "h2", Now: now}); err != nil {
		t.Fatal(err)
	}
	if live("ada1", now) || !live("ada2", now) {
		t.Errorf("after revoking h1: ada1 live %v, ada2 live %v; want false, true", live("ada1", now), live("ada2", now))
	}
	// Disabling the account ends them all.
	ada.Disabled = true
	if err := s.AccountUpdate(ctx, ada); err != nil {
		t.Fatal(err)
	}
	if live("ada2", now) {
		t.Error("a session of a disabled account is live")
	}

	if err := s.SessionDelete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.SessionDelete(ctx, "a"); err != nil {
		t.Errorf("deleting a session twice: %v, want no error", err)
	}
	if live("a", now) {
		t.Error("a deleted session is live")
	}
	n, err := s.SessionDeleteExpired(ctx, now)
	if err != nil || n != 1 {
		t.Errorf("SessionDeleteExpired: %d, %v; want the one expired session", n, err)
	}
	if !live("b", now) {
		t.Error("deleting the expired sessions took a live one")
	}
}
