package sqlite

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The dashboard's sessions.

var (
	sqlSessionInsert = newStatement(`INSERT INTO ui_sessions (id, expires_at, account, token_hash) VALUES (?, ?, ?, ?)`)
	// A session lives while its account is enabled and the token it was
	// started with (none: the client token, the admin's) is not revoked.
	sqlSessionLive = newStatement(`SELECT a.name, a.admin FROM ui_sessions s JOIN accounts a ON a.name = s.account
	WHERE s.id = ?1 AND s.expires_at >= ?2 AND NOT a.disabled
	AND (s.token_hash = '' OR EXISTS (SELECT 1 FROM account_tokens t
		WHERE t.hash = s.token_hash AND t.account = s.account AND t.revoked_at IS NULL))`)
	sqlSessionDelete        = newStatement(`DELETE FROM ui_sessions WHERE id = ?`)
	sqlSessionDeleteExpired = newStatement(`DELETE FROM ui_sessions WHERE expires_at < ?`)
)

// SessionInsert records a dashboard session.
func (q *querier) SessionInsert(ctx context.Context, s *store.Session) error {
	if _, err := q.exec(ctx, sqlSessionInsert, s.ID, s.ExpiresAt.UnixMicro(), s.Account, s.TokenHash); err != nil {
		return translate(err, "record a session")
	}
	return nil
}

// SessionLive returns who a session acts as when it is live at now, else
// store.ErrNotFound.
func (q *querier) SessionLive(ctx context.Context, id string, now time.Time) (domain.Caller, error) {
	var c domain.Caller
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&c.Account, &c.Admin) }, sqlSessionLive, id, now.UnixMicro())
	if err != nil {
		return domain.Caller{}, translate(err, "look a session up")
	}
	return c, nil
}

// SessionDelete deletes a session.
func (q *querier) SessionDelete(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, sqlSessionDelete, id); err != nil {
		return translate(err, "delete a session")
	}
	return nil
}

// SessionDeleteExpired deletes the sessions expired before before.
func (q *querier) SessionDeleteExpired(ctx context.Context, before time.Time) (int, error) {
	res, err := q.exec(ctx, sqlSessionDeleteExpired, before.UnixMicro())
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "delete expired sessions")
	}
	return int(n), nil
}
