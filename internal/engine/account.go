package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Accounts: who a client request acts as. An account's tokens are made
// here, shown once to whoever asked for them, and kept only as their
// domain.TokenHash.

// newToken returns a new account token and its hash.
func newToken() (token, hash string) {
	token = domain.AccountTokenPrefix + randomHex(32)
	return token, domain.TokenHash(token)
}

// CreateAccount records a new account with a first token, and returns the
// account as recorded and the token, which is not kept and cannot be read
// again. Weight 0 means 1. A name already taken is ErrConflict.
func (e *Engine) CreateAccount(ctx context.Context, a domain.Account) (*domain.Account, string, error) {
	if a.Weight == 0 {
		a.Weight = 1
	}
	if err := a.Validate(); err != nil {
		return nil, "", err
	}
	now := e.now()
	a.CreatedAt, a.UpdatedAt = now, now
	token, hash := newToken()
	err := e.tx(ctx, func(q store.Querier) error {
		if err := q.AccountInsert(ctx, &a); err != nil {
			return err
		}
		return q.AccountTokenInsert(ctx, &store.AccountToken{Hash: hash, Account: a.Name, CreatedAt: now})
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
	now := e.now()
	token, hash := newToken()
	err := e.tx(ctx, func(q store.Querier) error {
		if _, err := q.AccountGet(ctx, name); err != nil {
			return err
		}
		if err := q.AccountTokenInsert(ctx, &store.AccountToken{Hash: hash, Account: name, CreatedAt: now}); err != nil {
			return err
		}
		if !revokeOthers {
			return nil
		}
		_, err := q.AccountTokenRevoke(ctx, &store.AccountTokenRevokeParams{Account: name, Keep: hash, Now: now})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("issue a token of account %s: %w", name, err)
	}
	return token, nil
}

// Authenticate returns the account whose token token is. A token that is
// no account's, or revoked, or of a disabled account, is
// ErrUnauthenticated; the error does not say which.
func (e *Engine) Authenticate(ctx context.Context, token string) (*domain.Account, error) {
	refused := fmt.Errorf("unknown token: check the token you were given: %w", domain.ErrUnauthenticated)
	if !domain.LooksLikeAccountToken(token) {
		return nil, refused // no account's: not worth a lookup
	}
	t, err := e.store.AccountTokenGet(ctx, domain.TokenHash(token))
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
