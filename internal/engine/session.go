package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The dashboard's sessions live in the database, by the hash of their
// secret, so that logging out in one replica ends the session in all of
// them at once. The secrets and their hashes are the auth package's: the
// engine only keeps them.

// StartSession records session id (the hash of its secret) of account,
// started with the token whose hash is tokenHash ("" for the client
// token), until expires.
func (e *Engine) StartSession(ctx context.Context, id, account, tokenHash string, expires time.Time) error {
	return mapStoreErr(e.store.SessionInsert(ctx, &store.Session{ID: id, Account: account, TokenHash: tokenHash, ExpiresAt: expires}))
}

// SessionCaller returns who session id acts as, and false when it was
// never started, has ended or expired, its account is disabled or the
// token it was started with revoked.
func (e *Engine) SessionCaller(ctx context.Context, id string) (domain.Caller, bool, error) {
	c, err := e.store.SessionLive(ctx, id, e.now())
	if errors.Is(err, store.ErrNotFound) {
		return domain.Caller{}, false, nil
	}
	if err != nil {
		return domain.Caller{}, false, mapStoreErr(err)
	}
	return c, true, nil
}

// EndSession ends session id; ending one that is not there is no error.
func (e *Engine) EndSession(ctx context.Context, id string) error {
	return mapStoreErr(e.store.SessionDelete(ctx, id))
}

// PruneSessions deletes the sessions that have expired and returns how
// many it deleted.
func (e *Engine) PruneSessions(ctx context.Context) (int, error) {
	n, err := e.store.SessionDeleteExpired(ctx, e.now())
	if err != nil {
		return 0, mapStoreErr(fmt.Errorf("delete expired sessions: %w", err))
	}
	return n, nil
}
