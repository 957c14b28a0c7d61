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
		if kept, err := s.AccountTokenGet(ctx, engine.TokenHash(token)); err != nil || kept.Account != "alice" {
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

// TestAccountManagement: only an admin creates, lists, reads and changes
// accounts and issues tokens (ErrPermissionDenied for anyone else, who
// still reads its own account); a change applies the settings given and
// keeps the others; a bad value, an unknown account, or disabling or
// demoting the built-in admin is refused and changes nothing; an account
// read alone comes with its current use.
func TestAccountManagement(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		e := newEngine(s, engine.Config{Shard: "s0"})
		root := domain.WithCaller(t.Context(), domain.Caller{Account: "root", Admin: true})
		if _, _, err := e.CreateAccount(root, domain.Account{Name: "alice", Weight: 2, MaxJobs: 5}); err != nil {
			t.Fatal(err)
		}
		alice := domain.WithCaller(t.Context(), domain.Caller{Account: "alice"})

		// Anyone but an admin is refused, and nothing changes.
		one := 1
		denied := map[string]error{}
		_, _, denied["CreateAccount"] = e.CreateAccount(alice, domain.Account{Name: "mallory"})
		_, denied["IssueToken"] = e.IssueToken(alice, "alice", true)
		_, denied["ListAccounts"] = e.ListAccounts(alice)
		_, denied["GetAccount"] = e.GetAccount(alice, "alice")
		_, denied["UpdateAccount"] = e.UpdateAccount(alice, "alice", engine.AccountChange{MaxJobs: &one})
		for op, err := range denied {
			if !errors.Is(err, domain.ErrPermissionDenied) {
				t.Errorf("%s by a non-admin: %v, want ErrPermissionDenied", op, err)
			}
		}
		if list, err := e.ListAccounts(root); err != nil || len(list) != 2 || list[1].Name != "alice" || list[1].MaxJobs != 5 {
			t.Errorf("accounts after the refusals: %v, %v; want admin and alice, unchanged", list, err)
		}

		// A change applies what it names and keeps the rest.
		yes, w, storage := true, 7, int64(10<<30)
		got, err := e.UpdateAccount(root, "alice", engine.AccountChange{Disabled: &yes, Weight: &w, MaxStorage: &storage})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Disabled || got.Weight != 7 || got.MaxStorage != 10<<30 || got.MaxJobs != 5 || got.Admin || !got.UpdatedAt.After(got.CreatedAt) && !got.UpdatedAt.Equal(got.CreatedAt) {
			t.Errorf("after the change: %+v; want disabled, weight 7, 10 GiB of storage, max_jobs 5 kept", got)
		}

		// Refusals change nothing.
		zero, no, neg, huge := 0, false, int64(-1), domain.MaxAccountCount+1
		for what, c := range map[string]struct {
			name   string
			change engine.AccountChange
			want   error
		}{
			"weight 0":           {"alice", engine.AccountChange{Weight: &zero, MaxJobs: &one}, domain.ErrInvalidArgument},
			"negative storage":   {"alice", engine.AccountChange{MaxStorage: &neg}, domain.ErrInvalidArgument},
			"max_jobs too large": {"alice", engine.AccountChange{MaxJobs: &huge}, domain.ErrInvalidArgument},
			"unknown account":    {"bob", engine.AccountChange{MaxJobs: &one}, domain.ErrNotFound},
			"admin disabled":     {"admin", engine.AccountChange{Disabled: &yes}, domain.ErrConflict},
			"admin demoted":      {"admin", engine.AccountChange{Admin: &no, Weight: &w}, domain.ErrConflict},
		} {
			if _, err := e.UpdateAccount(root, c.name, c.change); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", what, err, c.want)
			}
		}
		a, err := e.GetAccount(root, "alice")
		if err != nil || a.Weight != 7 || a.MaxJobs != 5 || a.MaxStorage != 10<<30 || !a.Disabled {
			t.Errorf("alice after the refused changes: %+v, %v", a, err)
		}
		if a, err := e.GetAccount(root, "admin"); err != nil || !a.Admin || a.Disabled || a.Weight != 1 {
			t.Errorf("admin after the refused changes: %+v, %v", a, err)
		}
		if _, err := e.GetAccount(root, "bob"); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("GetAccount(bob): %v, want ErrNotFound", err)
		}

		// Its use: unfinished jobs, leased tasks, bytes of uploads.
		if _, _, err := e.CreateJob(alice, spec(3), ""); err != nil {
			t.Fatal(err)
		}
		done, _, err := e.CreateJob(alice, spec(1), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.CancelJob(alice, done.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w", Max: 2}); err != nil {
			t.Fatal(err)
		}
		own, err := e.CallerAccount(alice)
		if err != nil {
			t.Fatal(err)
		}
		if own.Name != "alice" || own.Usage == nil || *own.Usage != (engine.AccountUsage{Running: 2, Jobs: 1}) {
			t.Errorf("alice's own account: %+v, usage %+v; want 2 running, 1 unfinished job", own.Account, own.Usage)
		}
	})
}
