package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/store"
)

const (
	outboxColumns   = `id, shard, kind, payload, attempts, next_attempt_at, last_error, created_at`
	sqlOutboxInsert = `INSERT INTO outbox (shard, kind, payload, attempts, next_attempt_at, last_error, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`
	// SKIP LOCKED: concurrent claims by replicas take different messages.
	sqlOutboxClaim = `UPDATE outbox SET next_attempt_at = $1 WHERE id IN (
	SELECT id FROM outbox WHERE next_attempt_at <= $2 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
RETURNING ` + outboxColumns
	sqlOutboxUpdate   = `UPDATE outbox SET attempts = $2, next_attempt_at = $3, last_error = $4 WHERE id = $1`
	sqlOutboxDelete   = `DELETE FROM outbox WHERE id = $1`
	sqlOutboxGetStats = `SELECT count(next_attempt_at), count(*) - count(next_attempt_at),
	min(created_at) FILTER (WHERE next_attempt_at IS NOT NULL) FROM outbox`
)

// OutboxInsert records msgs, all or none, and sets their IDs.
func (q *querier) OutboxInsert(ctx context.Context, msgs []*store.OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	err := q.atomically(ctx, func(db dbtx) error {
		for _, m := range msgs {
			normTime(&m.NextAttemptAt)
			normTime(&m.CreatedAt)
			err := db.QueryRow(ctx, sqlOutboxInsert, m.Shard, m.Kind, m.Payload, m.Attempts,
				timeArg(m.NextAttemptAt), m.LastError, timeArg(m.CreatedAt)).Scan(&m.ID)
			if err != nil {
				return fmt.Errorf("a %s message to shard %s: %w", m.Kind, m.Shard, err)
			}
		}
		return nil
	})
	if err != nil {
		return translate(err, "record %d outbox messages", len(msgs))
	}
	return nil
}

// OutboxClaim takes the messages due at p.Now until p.Until.
func (q *querier) OutboxClaim(ctx context.Context, p *store.OutboxClaimParams) ([]*store.OutboxMessage, error) {
	rows, err := q.db.Query(ctx, sqlOutboxClaim, p.Until, p.Now, p.Limit)
	if err != nil {
		return nil, translate(err, "claim outbox messages")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.OutboxMessage, error) {
		var m store.OutboxMessage
		var next, created pgtype.Timestamptz
		err := r.Scan(&m.ID, &m.Shard, &m.Kind, &m.Payload, &m.Attempts, &next, &m.LastError, &created)
		m.NextAttemptAt, m.CreatedAt = timeOf(next), timeOf(created)
		return &m, err
	})
	if err != nil {
		return nil, translate(err, "claim outbox messages")
	}
	slices.SortFunc(out, func(a, b *store.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// OutboxUpdate writes m's delivery state.
func (q *querier) OutboxUpdate(ctx context.Context, m *store.OutboxMessage) error {
	normTime(&m.NextAttemptAt)
	tag, err := q.db.Exec(ctx, sqlOutboxUpdate, m.ID, m.Attempts, timeArg(m.NextAttemptAt), m.LastError)
	if err != nil {
		return translate(err, "update outbox message %d", m.ID)
	}
	if tag.RowsAffected() == 0 {
		return translate(store.ErrNotFound, "update outbox message %d", m.ID)
	}
	return nil
}

// OutboxDelete deletes a delivered message.
func (q *querier) OutboxDelete(ctx context.Context, id int64) error {
	if _, err := q.db.Exec(ctx, sqlOutboxDelete, id); err != nil {
		return translate(err, "delete outbox message %d", id)
	}
	return nil
}

// OutboxGetStats counts the outbox's messages.
func (q *querier) OutboxGetStats(ctx context.Context) (store.OutboxStats, error) {
	var s store.OutboxStats
	var oldest pgtype.Timestamptz
	if err := q.db.QueryRow(ctx, sqlOutboxGetStats).Scan(&s.Pending, &s.Dead, &oldest); err != nil {
		return s, translate(err, "count outbox messages")
	}
	s.Oldest = timeOf(oldest)
	return s, nil
}
