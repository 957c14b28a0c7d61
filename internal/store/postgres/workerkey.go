package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
)

// Worker keys, and the leases a key's workers hold.

const (
	sqlWorkerKeyInsert = `INSERT INTO worker_keys (account, name, hash, trusted, created_at) VALUES ($1, $2, $3, $4, $5)`
	sqlWorkerKeyGet    = `SELECT account, name, trusted, created_at FROM worker_keys WHERE hash = $1`
	sqlWorkerKeyList   = `SELECT account, name, trusted, created_at FROM worker_keys
	WHERE $1 = '' OR account = $1 ORDER BY account, name`
	sqlWorkerKeyDelete = `DELETE FROM worker_keys WHERE account = $1 AND name = $2`
	sqlWorkerKeyTrust  = `UPDATE worker_keys SET trusted = $3 WHERE account = $1 AND name = $2`
	sqlTaskLeasedBy    = `SELECT id FROM tasks WHERE state = 'leased' AND starts_with(lease_owner, $1)
UNION ALL SELECT t.id || '.r' || (b ->> 'n') FROM tasks AS t, jsonb_array_elements(t.ballots) AS b
WHERE t.state = 'leased' AND t.lease_owner = $2 AND b ->> 's' = 'leased' AND starts_with(b ->> 'o', $1)
ORDER BY 1`
)

// WorkerKeyInsert records a new worker key.
func (q *querier) WorkerKeyInsert(ctx context.Context, k *domain.WorkerKey, hash string) error {
	if _, err := q.db.Exec(ctx, sqlWorkerKeyInsert, k.Account, k.Name, hash, k.Trusted, timeArg(k.CreatedAt)); err != nil {
		return translate(err, "insert worker key %s/%s", k.Account, k.Name)
	}
	return nil
}

func scanWorkerKey(r pgx.Row) (*domain.WorkerKey, error) {
	var (
		k       domain.WorkerKey
		created pgtype.Timestamptz
	)
	err := r.Scan(&k.Account, &k.Name, &k.Trusted, &created)
	k.CreatedAt = timeOf(created)
	return &k, err
}

// WorkerKeyGet returns a worker key by its hash, or store.ErrNotFound.
func (q *querier) WorkerKeyGet(ctx context.Context, hash string) (*domain.WorkerKey, error) {
	k, err := scanWorkerKey(q.db.QueryRow(ctx, sqlWorkerKeyGet, hash))
	if err != nil {
		return nil, translate(err, "get a worker key")
	}
	return k, nil
}

// WorkerKeyList returns an account's worker keys, or everyone's.
func (q *querier) WorkerKeyList(ctx context.Context, account string) ([]*domain.WorkerKey, error) {
	rows, err := q.db.Query(ctx, sqlWorkerKeyList, account)
	if err != nil {
		return nil, translate(err, "list worker keys")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*domain.WorkerKey, error) { return scanWorkerKey(r) })
	if err != nil {
		return nil, translate(err, "list worker keys")
	}
	return out, nil
}

// WorkerKeyDelete deletes a worker key.
func (q *querier) WorkerKeyDelete(ctx context.Context, account, name string) error {
	return q.changeOne(ctx, sqlWorkerKeyDelete, "delete worker key %s/%s", account, name)
}

// WorkerKeyTrust sets whether a worker key is trusted.
func (q *querier) WorkerKeyTrust(ctx context.Context, account, name string, trusted bool) error {
	return q.changeOne(ctx, sqlWorkerKeyTrust, "trust worker key %s/%s", account, name, trusted)
}

// changeOne runs st on the worker key (account, name): store.ErrNotFound
// when it changed no row.
func (q *querier) changeOne(ctx context.Context, st, what, account, name string, args ...any) error {
	tag, err := q.db.Exec(ctx, st, append([]any{account, name}, args...)...)
	if err == nil && tag.RowsAffected() == 0 {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return translate(err, what, account, name)
	}
	return nil
}

// TaskListLeasedBy returns the leased tasks whose lease owner starts with
// prefix.
func (q *querier) TaskListLeasedBy(ctx context.Context, prefix string) ([]string, error) {
	rows, err := q.db.Query(ctx, sqlTaskLeasedBy, prefix, domain.QuorumLeaseOwner)
	if err != nil {
		return nil, translate(err, "list the leases of %s", prefix)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "list the leases of %s", prefix)
	}
	return out, nil
}
