package sqlite

import (
	"context"
	"database/sql"

	"github.com/scimesh/scimesh/internal/domain"
)

// Worker keys, and the leases a key's workers hold.

var (
	sqlWorkerKeyInsert = newStatement(`INSERT INTO worker_keys (account, name, hash, trusted, created_at) VALUES (?, ?, ?, ?, ?)`)
	sqlWorkerKeyGet    = newStatement(`SELECT account, name, trusted, created_at FROM worker_keys WHERE hash = ?`)
	sqlWorkerKeyList   = newStatement(`SELECT account, name, trusted, created_at FROM worker_keys
	WHERE ?1 = '' OR account = ?1 ORDER BY account, name`)
	sqlWorkerKeyDelete = newStatement(`DELETE FROM worker_keys WHERE account = ? AND name = ?`)
	sqlWorkerKeyTrust  = newStatement(`UPDATE worker_keys SET trusted = ?3 WHERE account = ?1 AND name = ?2`)
	sqlTaskLeasedBy    = newStatement(`SELECT id FROM tasks
	WHERE state = 'leased' AND substr(lease_owner, 1, length(?1)) = ?1
	UNION ALL SELECT t.id || '.r' || (b.value ->> '$.n') FROM tasks AS t, json_each(t.ballots) AS b
	WHERE t.state = 'leased' AND t.lease_owner = ?2 AND b.value ->> '$.s' = 'leased'
	AND substr(b.value ->> '$.o', 1, length(?1)) = ?1
	ORDER BY 1`)
)

// WorkerKeyInsert records a new worker key.
func (q *querier) WorkerKeyInsert(ctx context.Context, k *domain.WorkerKey, hash string) error {
	if _, err := q.exec(ctx, sqlWorkerKeyInsert, k.Account, k.Name, hash, k.Trusted, timeArg(k.CreatedAt)); err != nil {
		return translate(err, "insert worker key %s/%s", k.Account, k.Name)
	}
	return nil
}

func scanWorkerKey(r scanner, k *domain.WorkerKey) error {
	var created sql.NullInt64
	err := r.Scan(&k.Account, &k.Name, &k.Trusted, &created)
	k.CreatedAt = timeOf(created)
	return err
}

// WorkerKeyGet returns a worker key by its hash, or store.ErrNotFound.
func (q *querier) WorkerKeyGet(ctx context.Context, hash string) (*domain.WorkerKey, error) {
	var k domain.WorkerKey
	if err := q.queryRow(ctx, false, func(r scanner) error { return scanWorkerKey(r, &k) }, sqlWorkerKeyGet, hash); err != nil {
		return nil, translate(err, "get a worker key")
	}
	return &k, nil
}

// WorkerKeyList returns an account's worker keys, or everyone's.
func (q *querier) WorkerKeyList(ctx context.Context, account string) ([]*domain.WorkerKey, error) {
	var out []*domain.WorkerKey
	err := q.query(ctx, false, func(r scanner) error {
		var k domain.WorkerKey
		out = append(out, &k)
		return scanWorkerKey(r, &k)
	}, sqlWorkerKeyList, account)
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
func (q *querier) changeOne(ctx context.Context, st *statement, what, account, name string, args ...any) error {
	res, err := q.exec(ctx, st, append([]any{account, name}, args...)...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = sql.ErrNoRows
		}
	}
	if err != nil {
		return translate(err, what, account, name)
	}
	return nil
}

// TaskListLeasedBy returns the leased tasks whose lease owner starts with
// prefix.
func (q *querier) TaskListLeasedBy(ctx context.Context, prefix string) ([]string, error) {
	out, err := q.strings(ctx, sqlTaskLeasedBy, prefix, domain.QuorumLeaseOwner)
	if err != nil {
		return nil, translate(err, "list the leases of %s", prefix)
	}
	return out, nil
}
