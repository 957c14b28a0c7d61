package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// workChannel is the LISTEN/NOTIFY channel on which coordinators sharing a
// database tell each other that work became claimable.
const workChannel = "scimesh_work"

// NotifyWork tells every process listening on the database that work became
// claimable.
func (s *Store) NotifyWork(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, workChannel); err != nil {
		return translate(err, "notify work")
	}
	return nil
}

// ListenWork calls fn for every notification of work, on a connection of
// its own outside the pool, until ctx is done (then it returns nil) or the
// connection fails.
func (s *Store) ListenWork(ctx context.Context, fn func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return translate(err, "listen for work: connect")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+workChannel); err != nil {
		return translate(err, "listen for work")
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return translate(err, "listen for work")
		}
		fn()
	}
}
