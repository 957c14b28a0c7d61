package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// workChannel is the LISTEN/NOTIFY channel on which coordinators sharing a
// database tell each other that work became claimable.
const workChannel = "scimesh_work"

// NotifyWork tells every process listening on the database that work became
// claimable, with payload (at most 8000 bytes) saying what.
func (s *Store) NotifyWork(ctx context.Context, payload string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, workChannel, payload); err != nil {
		return translate(err, "notify work")
	}
	return nil
}

// ListenWork calls fn with the payload of every notification of work, this
// process's own included, on a connection of its own outside the pool,
// until ctx is done (then it returns nil) or the connection fails.
func (s *Store) ListenWork(ctx context.Context, fn func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return translate(err, "listen for work: connect")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+workChannel); err != nil {
		return translate(err, "listen for work")
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return translate(err, "listen for work")
		}
		fn(n.Payload)
	}
}
