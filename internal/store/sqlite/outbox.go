package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/scimesh/scimesh/internal/store"
)

const outboxColumns = `id, shard, kind, payload, attempts, next_attempt_at, last_error, created_at`

var (
	sqlOutboxInsert = newStatement(`INSERT INTO outbox (shard, kind, payload, attempts, next_attempt_at, last_error, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`)

	sqlOutboxClaim = newStatement(`UPDATE outbox SET next_attempt_at = ?1 WHERE id IN (
	SELECT id FROM outbox WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ?2 ORDER BY id LIMIT ?3)
	RETURNING ` + outboxColumns)

	sqlOutboxUpdate = newStatement(`UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?`)

	sqlOutboxDelete = newStatement(`DELETE FROM outbox WHERE id = ?`)

	sqlOutboxGetStats = newStatement(`SELECT count(next_attempt_at), count(*) - count(next_attempt_at),
	min(CASE WHEN next_attempt_at IS NOT NULL THEN created_at END) FROM outbox`)
)

// OutboxInsert records msgs, all or none, and sets their IDs.
func (q *querier) OutboxInsert(ctx context.Context, msgs []*store.OutboxMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	err := q.atomically(ctx, "outbox_insert", func(q *querier) error {
		for _, m := range msgs {
			err := q.queryRow(ctx, true, func(r scanner) error { return r.Scan(&m.ID) }, sqlOutboxInsert,
				m.Shard, m.Kind, bytesArg(m.Payload), m.Attempts, timeArg(m.NextAttemptAt), m.LastError, timeArg(m.CreatedAt))
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
	var out []*store.OutboxMessage
	err := q.query(ctx, true, func(r scanner) error {
		m, err := scanOutbox(r)
		out = append(out, m)
		return err
	}, sqlOutboxClaim, timeArg(p.Until), timeArg(p.Now), p.Limit)
	if err != nil {
		return nil, translate(err, "claim outbox messages")
	}
	slices.SortFunc(out, func(a, b *store.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func scanOutbox(r scanner) (*store.OutboxMessage, error) {
	var m store.OutboxMessage
	var next, created sql.NullInt64
	if err := r.Scan(&m.ID, &m.Shard, &m.Kind, &m.Payload, &m.Attempts, &next, &m.LastError, &created); err != nil {
		return nil, err
	}
	m.NextAttemptAt, m.CreatedAt = timeOf(next), timeOf(created)
	return &m, nil
}

// OutboxUpdate writes m's delivery state.
func (q *querier) OutboxUpdate(ctx context.Context, m *store.OutboxMessage) error {
	res, err := q.exec(ctx, sqlOutboxUpdate, m.Attempts, timeArg(m.NextAttemptAt), m.LastError, m.ID)
	if err != nil {
		return translate(err, "update outbox message %d", m.ID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return translate(err, "update outbox message %d", m.ID)
	}
	if n == 0 {
		return translate(store.ErrNotFound, "update outbox message %d", m.ID)
	}
	return nil
}

// OutboxDelete deletes a delivered message.
func (q *querier) OutboxDelete(ctx context.Context, id int64) error {
	if _, err := q.exec(ctx, sqlOutboxDelete, id); err != nil {
		return translate(err, "delete outbox message %d", id)
	}
	return nil
}

// OutboxGetStats counts the outbox's messages.
func (q *querier) OutboxGetStats(ctx context.Context) (store.OutboxStats, error) {
	var s store.OutboxStats
	var oldest sql.NullInt64
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&s.Pending, &s.Dead, &oldest) }, sqlOutboxGetStats)
	if err != nil {
		return s, translate(err, "count outbox messages")
	}
	s.Oldest = timeOf(oldest)
	return s, nil
}
