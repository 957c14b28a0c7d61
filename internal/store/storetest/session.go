package storetest

import (
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/store"
)

// exerciseSessions: a recorded session is live until it expires or is
// deleted, in every connection of the store; expired ones are deleted in
// one call that counts them.
func exerciseSessions(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	now := Epoch()
	live := func(id string, at time.Time) bool {
		t.Helper()
		ok, err := s.SessionLive(ctx, id, at)
		if err != nil {
			t.Fatalf("SessionLive(%s): %v", id, err)
		}
		return ok
	}
	for id, exp := range map[string]time.Time{"a": now.Add(time.Hour), "b": now.Add(time.Minute), "c": now.Add(-time.Second)} {
		if err := s.SessionInsert(ctx, id, exp); err != nil {
			t.Fatalf("SessionInsert(%s): %v", id, err)
		}
	}
	if !live("a", now) || !live("b", now) || !live("b", now.Add(time.Minute)) {
		t.Error("a session before its expiry is not live")
	}
	if live("c", now) || live("b", now.Add(time.Minute+time.Microsecond)) {
		t.Error("a session past its expiry is live")
	}
	if live("nobody", now) {
		t.Error("a session never recorded is live")
	}
	// In a transaction too: the dashboard reads it anywhere.
	if err := s.InTx(ctx, func(q store.Querier) error {
		if ok, err := q.SessionLive(ctx, "a", now); err != nil || !ok {
			t.Errorf("SessionLive in a transaction: %v, %v; want live", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
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
