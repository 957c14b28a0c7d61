package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// TestAccounts: an account is created with a token that authenticates it
// and is kept only as its hash; a name is taken once and a bad account
// changes nothing; a new token with --revoke-others refuses the old ones
// at once; a disabled account's tokens, a revoked token and an unknown
// one are all refused alike.
func TestAccounts(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		a, token, err := e.CreateAccount(ctx, domain.Account{Name: "alice", MaxJobs: 3})
		if err != nil {
			t.Fatal(err)
		}
		if a.Weight != 1 || a.MaxJobs != 3 || a.CreatedAt.IsZero() || !strings.HasPrefix(token, "scimesh_") || len(token) != len("scimesh_")+64 {
			t.Fatalf("created %+v with token %q; want weight 1, the quota asked, and a prefixed 256-bit token", a, token)
		}
		if kept, err := s.AccountTokenGet(ctx, domain.TokenHash(token)); err != nil || kept.Account != "alice" {
			t.Fatalf("the token kept by its hash: %+v, %v", kept, err)
		}
		if _, err := s.AccountTokenGet(ctx, token); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the token itself is a key of the store: %v", err)
		}
		if got, err := e.Authenticate(ctx, token); err != nil || got.Name != "alice" {
			t.Fatalf("Authenticate(alice's token) = %+v, %v", got, err)
		}

		if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "alice"}); !errors.Is(err, domain.ErrConflict) {
			t.Errorf("a second alice: %v, want ErrConflict", err)
		}
		if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "Bob"}); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("account Bob: %v, want ErrInvalidArgument", err)
		}
		if list, err := s.AccountList(ctx); err != nil || len(list) != 2 {
			t.Errorf("accounts after the refusals: %v, %v; want admin and alice", list, err)
		}

		second, err := e.IssueToken(ctx, "alice", false)
		if err != nil {
			t.Fatal(err)
		}
		third, err := e.IssueToken(ctx, "alice", true)
		if err != nil {
			t.Fatal(err)
		}
		for name, tk := range map[string]string{"the first": token, "the second": second} {
			if _, err := e.Authenticate(ctx, tk); !errors.Is(err, domain.ErrUnauthenticated) {
				t.Errorf("%s token after --revoke-others: %v, want ErrUnauthenticated", name, err)
			}
		}
		if _, err := e.Authenticate(ctx, third); err != nil {
			t.Errorf("the token kept: %v", err)
		}
		if _, err := e.IssueToken(ctx, "bob", false); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("a token of bob, who does not exist: %v, want ErrNotFound", err)
		}

		a.Disabled = true
		if err := s.AccountUpdate(ctx, a); err != nil {
			t.Fatal(err)
		}
		for name, tk := range map[string]string{"a disabled account's": third, "an unknown": "scimesh_" + strings.Repeat("0", 64), "an empty": ""} {
			if got, err := e.Authenticate(ctx, tk); !errors.Is(err, domain.ErrUnauthenticated) {
				t.Errorf("%s token: %+v, %v; want ErrUnauthenticated", name, got, err)
			}
		}
	})
}
