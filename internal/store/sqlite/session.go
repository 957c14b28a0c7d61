package sqlite

import (
	"context"
	"time"
)

// The dashboard's sessions.

var (
	sqlSessionInsert        = newStatement(`INSERT INTO ui_sessions (id, expires_at) VALUES (?, ?)`)
	sqlSessionLive          = newStatement(`SELECT count(*) FROM ui_sessions WHERE id = ? AND expires_at >= ?`)
	sqlSessionDelete        = newStatement(`DELETE FROM ui_sessions WHERE id = ?`)
	sqlSessionDeleteExpired = newStatement(`DELETE FROM ui_sessions WHERE expires_at < ?`)
)

// SessionInsert records a dashboard session until expires.
func (q *querier) SessionInsert(ctx context.Context, id string, expires time.Time) error {
	if _, err := q.exec(ctx, sqlSessionInsert, id, expires.UnixMicro()); err != nil {
		return translate(err, "record a session")
	}
	return nil
}

// SessionLive reports whether a session is recorded and live at now.
func (q *querier) SessionLive(ctx context.Context, id string, now time.Time) (bool, error) {
	var n int
	err := q.query(ctx, false, func(r scanner) error { return r.Scan(&n) }, sqlSessionLive, id, now.UnixMicro())
	if err != nil {
		return false, translate(err, "look a session up")
	}
	return n > 0, nil
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
