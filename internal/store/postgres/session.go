package postgres

import (
	"context"
	"time"
)

// The dashboard's sessions.

const (
	sqlSessionInsert        = `INSERT INTO ui_sessions (id, expires_at) VALUES ($1, $2)`
	sqlSessionLive          = `SELECT EXISTS (SELECT 1 FROM ui_sessions WHERE id = $1 AND expires_at >= $2)`
	sqlSessionDelete        = `DELETE FROM ui_sessions WHERE id = $1`
	sqlSessionDeleteExpired = `DELETE FROM ui_sessions WHERE expires_at < $1`
)

// SessionInsert records a dashboard session until expires.
func (q *querier) SessionInsert(ctx context.Context, id string, expires time.Time) error {
	if _, err := q.db.Exec(ctx, sqlSessionInsert, id, expires); err != nil {
		return translate(err, "record a session")
	}
	return nil
}

// SessionLive reports whether a session is recorded and live at now.
func (q *querier) SessionLive(ctx context.Context, id string, now time.Time) (bool, error) {
	var live bool
	if err := q.db.QueryRow(ctx, sqlSessionLive, id, now).Scan(&live); err != nil {
		return false, translate(err, "look a session up")
	}
	return live, nil
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
