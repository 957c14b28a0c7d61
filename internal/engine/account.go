package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Accounts: who a client request acts as. An account's tokens are made
// here, shown once to whoever asked for them, and kept only as their
// TokenHash. Only an admin manages accounts (ErrPermissionDenied
// for anyone else); any caller may read its own (CallerAccount).

// RequireAdmin refuses a caller of ctx that is not an admin, as every
// account operation but CallerAccount does: a transport may ask first,
// so as to refuse before it reads a request's body.
func RequireAdmin(ctx context.Context) error {
	if c := domain.CallerOf(ctx); !c.Admin {
		return fmt.Errorf("account %s is not an admin; only an admin may manage accounts: %w", c.Account, domain.ErrPermissionDenied)
	}
	return nil
}

// TokenHash is the hash an account token is kept and looked up by: a
// token is 256 random bits, so a fast hash is enough.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// newToken returns a new secret that starts with prefix (an account
// token's or a worker key's), and its hash.
func newToken(prefix string) (token, hash string) {
	token = prefix + randomHex(32)
	return token, TokenHash(token)
}

// CreateAccount records a new account with a first token, and returns the
// account as recorded and the token, which is not kept and cannot be read
// again. Weight 0 means 1. A name already taken is ErrConflict.
func (e *Engine) CreateAccount(ctx context.Context, a domain.Account) (*domain.Account, string, error) {
	if err := RequireAdmin(ctx); err != nil {
		return nil, "", err
	}
	if a.Weight == 0 {
		a.Weight = 1
	}
	if err := a.Validate(); err != nil {
		return nil, "", err
	}
	now := e.now()
	a.CreatedAt, a.UpdatedAt = now, now
	token, hash := newToken(domain.AccountTokenPrefix)
	err := e.tx(ctx, func(q store.Querier) error {
		if err := q.AccountInsert(ctx, &a); err != nil {
			return err
		}
		if err := q.AccountTokenInsert(ctx, &store.AccountToken{Hash: hash, Account: a.Name, CreatedAt: now}); err != nil {
			return err
		}
		return e.audit(ctx, q, actionAccountCreate, a.Name, accountDetail(&a)+"; its first token issued")
	})
	if errors.Is(err, store.ErrDuplicate) {
		return nil, "", fmt.Errorf("account %q exists already: %w", a.Name, domain.ErrConflict)
	}
	if err != nil {
		return nil, "", fmt.Errorf("create account %s: %w", a.Name, err)
	}
	return &a, token, nil
}

// IssueToken makes a new token of account name and returns it; with
// revokeOthers, every other token of the account is revoked in the same
// transaction. An account that does not exist is ErrNotFound.
func (e *Engine) IssueToken(ctx context.Context, name string, revokeOthers bool) (string, error) {
	if err := RequireAdmin(ctx); err != nil {
		return "", err
	}
	now := e.now()
	token, hash := newToken(domain.AccountTokenPrefix)
	err := e.tx(ctx, func(q store.Querier) error {
		if _, err := q.AccountGet(ctx, name); err != nil {
			return notFound(err, "account %q", name)
		}
		if err := q.AccountTokenInsert(ctx, &store.AccountToken{Hash: hash, Account: name, CreatedAt: now}); err != nil {
			return err
		}
		if err := e.audit(ctx, q, actionTokenIssue, name, ""); err != nil {
			return err
		}
		if !revokeOthers {
			return nil
		}
		n, err := q.AccountTokenRevoke(ctx, &store.AccountTokenRevokeParams{Account: name, Keep: hash, Now: now})
		if err != nil || n == 0 {
			return err
		}
		return e.audit(ctx, q, actionTokenRevoke, name, fmt.Sprintf("%d other tokens", n))
	})
	if err != nil {
		return "", fmt.Errorf("issue a token of account %s: %w", name, err)
	}
	return token, nil
}

// AccountUsage is what an account uses now, which its quotas bound.
type AccountUsage struct {
	Running      int   // its leased tasks that workers run (max_running)
	Jobs         int   // its unfinished jobs (max_jobs)
	StorageBytes int64 // the bytes of its uploads (max_storage)
}

// AccountView is an account and, when read alone, its current use.
type AccountView struct {
	*domain.Account
	Usage *AccountUsage // nil in a list
}

// ListAccounts returns every account, by name, for an admin.
func (e *Engine) ListAccounts(ctx context.Context) ([]*domain.Account, error) {
	if err := RequireAdmin(ctx); err != nil {
		return nil, err
	}
	list, err := e.store.AccountList(ctx)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list accounts: %w", err))
	}
	return list, nil
}

// GetAccount returns account name with its current use, for an admin;
// one that does not exist is ErrNotFound.
func (e *Engine) GetAccount(ctx context.Context, name string) (*AccountView, error) {
	if err := RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return e.accountView(ctx, name)
}

// CallerAccount returns the account of the caller of ctx, whoever it is,
// with its current use.
func (e *Engine) CallerAccount(ctx context.Context) (*AccountView, error) {
	return e.accountView(ctx, domain.CallerOf(ctx).Account)
}

func (e *Engine) accountView(ctx context.Context, name string) (*AccountView, error) {
	a, err := e.store.AccountGet(ctx, name)
	if err != nil {
		return nil, notFound(err, "account %q", name)
	}
	u, err := e.accountUsage(ctx, name)
	if err != nil {
		return nil, err
	}
	return &AccountView{Account: a, Usage: u}, nil
}

// accountUsage counts what account name uses now.
func (e *Engine) accountUsage(ctx context.Context, name string) (*AccountUsage, error) {
	var u AccountUsage
	var err error
	if u.Running, err = e.store.TaskCountLeased(ctx, name); err != nil {
		return nil, mapStoreErr(err)
	}
	if u.Jobs, err = e.store.JobCountUnfinished(ctx, name); err != nil {
		return nil, mapStoreErr(err)
	}
	if u.StorageBytes, err = e.store.UploadSumBytes(ctx, name); err != nil {
		return nil, mapStoreErr(err)
	}
	return &u, nil
}

// AccountChange is what UpdateAccount changes of an account: each
// setting that is not nil.
type AccountChange struct {
	Admin, Disabled             *bool
	Weight, MaxRunning, MaxJobs *int
	MaxStorage                  *int64
}

// Apply sets a's settings that c changes.
func (c *AccountChange) Apply(a *domain.Account) {
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	if c.Admin != nil {
		a.Admin = *c.Admin
	}
	if c.Disabled != nil {
		a.Disabled = *c.Disabled
	}
	set(&a.Weight, c.Weight)
	set(&a.MaxRunning, c.MaxRunning)
	set(&a.MaxJobs, c.MaxJobs)
	if c.MaxStorage != nil {
		a.MaxStorage = *c.MaxStorage
	}
}

// UpdateAccount changes the settings of account name as c says, for an
// admin, and returns the account as it is now. An account that does not
// exist is ErrNotFound, a setting out of its bounds ErrInvalidArgument;
// the built-in admin account, whose token CLIENT_AUTH_TOKEN is, can be
// neither disabled nor made a non-admin (ErrConflict). The account's row
// is locked while it changes, so that two changes at once both apply.
func (e *Engine) UpdateAccount(ctx context.Context, name string, c AccountChange) (*domain.Account, error) {
	if err := RequireAdmin(ctx); err != nil {
		return nil, err
	}
	var out *domain.Account
	err := e.tx(ctx, func(q store.Querier) error {
		a, err := q.AccountLock(ctx, name)
		if err != nil {
			return notFound(err, "account %q", name)
		}
		was := *a
		c.Apply(a)
		switch {
		case a.Name == domain.AdminAccount && a.Disabled:
			return fmt.Errorf("the built-in account admin cannot be disabled: CLIENT_AUTH_TOKEN acts as it; change that token instead: %w", domain.ErrConflict)
		case a.Name == domain.AdminAccount && !a.Admin:
			return fmt.Errorf("the built-in account admin stays an admin: CLIENT_AUTH_TOKEN acts as it: %w", domain.ErrConflict)
		}
		if err := a.Validate(); err != nil {
			return err
		}
		if *a != was {
			a.UpdatedAt = e.now()
			if err := q.AccountUpdate(ctx, a); err != nil {
				return err
			}
			if err := e.auditAccountChange(ctx, q, &was, a); err != nil {
				return err
			}
		}
		out = a
		return nil
	})
	if err != nil {
		return nil, err // each error names the account, or the setting refused
	}
	e.authChanged() // its keys' workers are refused once it is disabled
	return out, nil
}

// auditAccountChange records, in the transaction of q, how account was
// became now: disabled or enabled, and its other settings changed.
func (e *Engine) auditAccountChange(ctx context.Context, q store.Querier, was, now *domain.Account) error {
	if was.Disabled != now.Disabled {
		action := actionAccountEnable
		if now.Disabled {
			action = actionAccountDisable
		}
		if err := e.audit(ctx, q, action, now.Name, ""); err != nil {
			return err
		}
	}
	var changed []string
	note := func(name string, from, to any) {
		if from != to {
			changed = append(changed, fmt.Sprintf("%s %v → %v", name, from, to))
		}
	}
	note("admin", was.Admin, now.Admin)
	note("weight", was.Weight, now.Weight)
	note("max_running", was.MaxRunning, now.MaxRunning)
	note("max_jobs", was.MaxJobs, now.MaxJobs)
	note("max_storage", was.MaxStorage, now.MaxStorage)
	if len(changed) == 0 {
		return nil
	}
	return e.audit(ctx, q, actionAccountUpdate, now.Name, strings.Join(changed, ", "))
}

// accountDetail describes a's settings for the audit trail.
func accountDetail(a *domain.Account) string {
	return fmt.Sprintf("admin %t, disabled %t, weight %d, max_running %d, max_jobs %d, max_storage %d",
		a.Admin, a.Disabled, a.Weight, a.MaxRunning, a.MaxJobs, a.MaxStorage)
}

// Authenticate returns the account whose token token is. A token that is
// no account's, or revoked, or of a disabled account, is
// ErrUnauthenticated; the error does not say which.
func (e *Engine) Authenticate(ctx context.Context, token string) (*domain.Account, error) {
	refused := fmt.Errorf("unknown token: check the token you were given: %w", domain.ErrUnauthenticated)
	if !domain.LooksLikeAccountToken(token) {
		return nil, refused // no account's: not worth a lookup
	}
	t, err := e.store.AccountTokenGet(ctx, TokenHash(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, refused
	}
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("look a token up: %w", err))
	}
	if !t.RevokedAt.IsZero() {
		return nil, refused
	}
	a, err := e.store.AccountGet(ctx, t.Account)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refused
	}
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("read account %s: %w", t.Account, err))
	}
	if a.Disabled {
		return nil, refused
	}
	return a, nil
}
