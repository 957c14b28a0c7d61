package engine

import (
	"context"
	"fmt"
	"time"
)

// The dashboard's sessions live in the database, by the hash of their
// secret, so that logging out in one replica ends the session in all of
// them at once. The secrets and their hashes are the auth package's: the
// engine only keeps them.

// StartSession records session id (the hash of its secret) until expires.
func (e *Engine) StartSession(ctx context.Context, id string, expires time.Time) error {
	return mapStoreErr(e.store.SessionInsert(ctx, id, expires))
}

// SessionLive reports whether session id was started, has not ended and
// has not expired.
func (e *Engine) SessionLive(ctx context.Context, id string) (bool, error) {
	live, err := e.store.SessionLive(ctx, id, e.now())
	return live, mapStoreErr(err)
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
