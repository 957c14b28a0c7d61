package postgres

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The dashboard's sessions.

const (
	sqlSessionInsert = `INSERT INTO ui_sessions (id, expires_at, account, token_hash) VALUES ($1, $2, $3, $4)`
	// A session lives while its account is enabled and the token it was
	// started with (none: the client token, the admin's) is not revoked.
	sqlSessionLive = `SELECT a.name, a.admin FROM ui_sessions s JOIN accounts a ON a.name = s.account
WHERE s.id = $1 AND s.expires_at >= $2 AND NOT a.disabled
AND (s.token_hash = '' OR EXISTS (SELECT 1 FROM account_tokens t
	WHERE t.hash = s.token_hash AND t.account = s.account AND t.revoked_at IS NULL))`
	sqlSessionDelete        = `DELETE FROM ui_sessions WHERE id = $1`
	sqlSessionDeleteExpired = `DELETE FROM ui_sessions WHERE expires_at < $1`
)

// SessionInsert records a dashboard session.
func (q *querier) SessionInsert(ctx context.Context, s *store.Session) error {
	if _, err := q.db.Exec(ctx, sqlSessionInsert, s.ID, s.ExpiresAt, s.Account, s.TokenHash); err != nil {
		return translate(err, "record a session")
	}
	return nil
}

// SessionLive returns who a session acts as when it is live at now, else
// store.ErrNotFound.
func (q *querier) SessionLive(ctx context.Context, id string, now time.Time) (domain.Caller, error) {
	var c domain.Caller
	if err := q.db.QueryRow(ctx, sqlSessionLive, id, now).Scan(&c.Account, &c.Admin); err != nil {
		return domain.Caller{}, translate(err, "look a session up")
	}
	return c, nil
}

// SessionDelete deletes a session.
func (q *querier) SessionDelete(ctx context.Context, id string) error {
	if _, err := q.db.Exec(ctx, sqlSessionDelete, id); err != nil {
		return translate(err, "delete a session")
	}
	return nil
}

// SessionDeleteExpired deletes the sessions expired before before.
func (q *querier) SessionDeleteExpired(ctx context.Context, before time.Time) (int, error) {
	tag, err := q.db.Exec(ctx, sqlSessionDeleteExpired, before)
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	return int(tag.RowsAffected()), nil
}
