package sqlite

import (
	"context"
	"database/sql"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Accounts and their tokens.

const accountColumns = `name, admin, disabled, weight, max_running, max_jobs, max_storage, created_at, updated_at`

var (
	sqlAccountInsert = newStatement(`INSERT INTO accounts (` + accountColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	sqlAccountGet    = newStatement(`SELECT ` + accountColumns + ` FROM accounts WHERE name = ?`)
	sqlAccountList   = newStatement(`SELECT ` + accountColumns + ` FROM accounts ORDER BY name`)
	sqlAccountUpdate = newStatement(`UPDATE accounts SET admin = ?2, disabled = ?3, weight = ?4, max_running = ?5,
	max_jobs = ?6, max_storage = ?7, updated_at = ?8 WHERE name = ?1`)
	sqlAccountTokenInsert = newStatement(`INSERT INTO account_tokens (hash, account, created_at, revoked_at) VALUES (?, ?, ?, ?)`)
	sqlAccountTokenGet    = newStatement(`SELECT hash, account, created_at, revoked_at FROM account_tokens WHERE hash = ?`)
	sqlAccountTokenRevoke = newStatement(`UPDATE account_tokens SET revoked_at = ?3
	WHERE account = ?1 AND hash != ?2 AND revoked_at IS NULL`)

	sqlJobCountUnfinished = newStatement(`SELECT count(*) FROM jobs WHERE owner = ? AND status IN ('pending', 'running')`)
	sqlUploadSumBytes     = newStatement(`SELECT coalesce(sum(bytes), 0) FROM uploads WHERE owner = ?`)
	sqlTaskCountLeased    = newStatement(`SELECT count(*) FROM tasks WHERE state = 'leased' AND owner = ? AND kind IN ('chunk', 'tree')`)
	sqlTaskCountLeasedBy  = newStatement(`SELECT owner, count(*) FROM tasks
	WHERE state = 'leased' AND owner IN (SELECT value FROM json_each(?)) AND kind IN ('chunk', 'tree') GROUP BY owner`)
)

// AccountInsert records a new account.
func (q *querier) AccountInsert(ctx context.Context, a *domain.Account) error {
	_, err := q.exec(ctx, sqlAccountInsert, a.Name, a.Admin, a.Disabled, a.Weight, a.MaxRunning, a.MaxJobs, a.MaxStorage,
		timeArg(a.CreatedAt), timeArg(a.UpdatedAt))
	if err != nil {
		return translate(err, "insert account %s", a.Name)
	}
	return nil
}

// scanAccount reads a row of accountColumns.
func scanAccount(r scanner, a *domain.Account) error {
	var created, updated sql.NullInt64
	err := r.Scan(&a.Name, &a.Admin, &a.Disabled, &a.Weight, &a.MaxRunning, &a.MaxJobs, &a.MaxStorage, &created, &updated)
	a.CreatedAt, a.UpdatedAt = timeOf(created), timeOf(updated)
	return err
}

// AccountGet returns an account, or store.ErrNotFound.
func (q *querier) AccountGet(ctx context.Context, name string) (*domain.Account, error) {
	var a domain.Account
	if err := q.queryRow(ctx, false, func(r scanner) error { return scanAccount(r, &a) }, sqlAccountGet, name); err != nil {
		return nil, translate(err, "get account %s", name)
	}
	return &a, nil
}

// AccountList returns every account, by name.
func (q *querier) AccountList(ctx context.Context) ([]*domain.Account, error) {
	var out []*domain.Account
	err := q.query(ctx, false, func(r scanner) error {
		var a domain.Account
		out = append(out, &a)
		return scanAccount(r, &a)
	}, sqlAccountList)
	if err != nil {
		return nil, translate(err, "list accounts")
	}
	return out, nil
}

// AccountUpdate writes an account's settings.
func (q *querier) AccountUpdate(ctx context.Context, a *domain.Account) error {
	res, err := q.exec(ctx, sqlAccountUpdate, a.Name, a.Admin, a.Disabled, a.Weight, a.MaxRunning, a.MaxJobs, a.MaxStorage, timeArg(a.UpdatedAt))
	if err != nil {
		return translate(err, "update account %s", a.Name)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = sql.ErrNoRows
		}
		return translate(err, "update account %s", a.Name)
	}
	return nil
}

// AccountLock returns an account. Transactions run one at a time on
// SQLite's one writer, so a read inside one holds until it ends.
func (q *querier) AccountLock(ctx context.Context, name string) (*domain.Account, error) {
	return q.AccountGet(ctx, name)
}

// count runs a statement that returns one number.
func (q *querier) count(ctx context.Context, st *statement, arg any) (int64, error) {
	var n int64
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&n) }, st, arg)
	return n, err
}

// JobCountUnfinished counts an account's pending and running jobs.
func (q *querier) JobCountUnfinished(ctx context.Context, owner string) (int, error) {
	n, err := q.count(ctx, sqlJobCountUnfinished, owner)
	if err != nil {
		return 0, translate(err, "count the unfinished jobs of %s", owner)
	}
	return int(n), nil
}

// UploadSumBytes sums the bytes of an account's uploads.
func (q *querier) UploadSumBytes(ctx context.Context, owner string) (int64, error) {
	n, err := q.count(ctx, sqlUploadSumBytes, owner)
	if err != nil {
		return 0, translate(err, "sum the uploads of %s", owner)
	}
	return n, nil
}

// TaskCountLeased counts an account's leased tasks that workers run.
func (q *querier) TaskCountLeased(ctx context.Context, owner string) (int, error) {
	n, err := q.count(ctx, sqlTaskCountLeased, owner)
	if err != nil {
		return 0, translate(err, "count the leased tasks of %s", owner)
	}
	return int(n), nil
}

// TaskCountLeasedLocked counts owners' leased tasks that workers run: a
// transaction holds the one writer, so no other claim leases theirs
// before it ends.
func (q *querier) TaskCountLeasedLocked(ctx context.Context, owners []string) (map[string]int, error) {
	if len(owners) == 0 {
		return nil, nil
	}
	out, err := queryByKey[int](ctx, q, sqlTaskCountLeasedBy, jsonArray(owners))
	if err != nil {
		return nil, translate(err, "count the leased tasks of %d accounts", len(owners))
	}
	return out, nil
}

// AccountTokenInsert records a new token.
func (q *querier) AccountTokenInsert(ctx context.Context, t *store.AccountToken) error {
	if _, err := q.exec(ctx, sqlAccountTokenInsert, t.Hash, t.Account, timeArg(t.CreatedAt), timeArg(t.RevokedAt)); err != nil {
		return translate(err, "insert a token of account %s", t.Account)
	}
	return nil
}

// AccountTokenGet returns a token by its hash, or store.ErrNotFound.
func (q *querier) AccountTokenGet(ctx context.Context, hash string) (*store.AccountToken, error) {
	var (
		t                store.AccountToken
		created, revoked sql.NullInt64
	)
	err := q.queryRow(ctx, false, func(r scanner) error { return r.Scan(&t.Hash, &t.Account, &created, &revoked) }, sqlAccountTokenGet, hash)
	if err != nil {
		return nil, translate(err, "get a token")
	}
	t.CreatedAt, t.RevokedAt = timeOf(created), timeOf(revoked)
	return &t, nil
}

// AccountTokenRevoke revokes an account's tokens but one.
func (q *querier) AccountTokenRevoke(ctx context.Context, p *store.AccountTokenRevokeParams) (int, error) {
	res, err := q.exec(ctx, sqlAccountTokenRevoke, p.Account, p.Keep, timeArg(p.Now))
	if err != nil {
		return 0, translate(err, "revoke the tokens of account %s", p.Account)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "revoke the tokens of account %s", p.Account)
	}
	return int(n), nil
}
