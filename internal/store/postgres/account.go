package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Accounts and their tokens.

const (
	accountColumns   = `name, admin, disabled, weight, max_running, max_jobs, max_storage, created_at, updated_at`
	sqlAccountInsert = `INSERT INTO accounts (` + accountColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	sqlAccountGet    = `SELECT ` + accountColumns + ` FROM accounts WHERE name = $1`
	sqlAccountList   = `SELECT ` + accountColumns + ` FROM accounts ORDER BY name`
	sqlAccountLock   = sqlAccountGet + ` FOR UPDATE`
	sqlAccountUpdate = `UPDATE accounts SET admin = $2, disabled = $3, weight = $4, max_running = $5,
	max_jobs = $6, max_storage = $7, updated_at = $8 WHERE name = $1`
	sqlAccountTokenInsert = `INSERT INTO account_tokens (hash, account, created_at, revoked_at) VALUES ($1, $2, $3, $4)`
	sqlAccountTokenGet    = `SELECT hash, account, created_at, revoked_at FROM account_tokens WHERE hash = $1`
	sqlAccountTokenRevoke = `UPDATE account_tokens SET revoked_at = $3
	WHERE account = $1 AND hash != $2 AND revoked_at IS NULL`

	sqlJobCountUnfinished = `SELECT count(*) FROM jobs WHERE owner = $1 AND status IN ('pending', 'running')`
	sqlUploadSumBytes     = `SELECT coalesce(sum(bytes), 0) FROM uploads WHERE owner = $1`
	sqlTaskCountLeased    = `SELECT count(*) FROM tasks WHERE state = 'leased' AND owner = $1 AND kind IN ('chunk', 'tree')`
	sqlTaskCountLeasedBy  = `SELECT owner, count(*) FROM tasks WHERE state = 'leased' AND owner = ANY($1) AND kind IN ('chunk', 'tree') GROUP BY owner`
)

// AccountInsert records a new account.
func (q *querier) AccountInsert(ctx context.Context, a *domain.Account) error {
	_, err := q.db.Exec(ctx, sqlAccountInsert, a.Name, a.Admin, a.Disabled, a.Weight, a.MaxRunning, a.MaxJobs, a.MaxStorage,
		timeArg(a.CreatedAt), timeArg(a.UpdatedAt))
	if err != nil {
		return translate(err, "insert account %s", a.Name)
	}
	return nil
}

// scanAccount reads a row of accountColumns.
func scanAccount(r pgx.Row) (*domain.Account, error) {
	var (
		a                domain.Account
		created, updated pgtype.Timestamptz
	)
	err := r.Scan(&a.Name, &a.Admin, &a.Disabled, &a.Weight, &a.MaxRunning, &a.MaxJobs, &a.MaxStorage, &created, &updated)
	a.CreatedAt, a.UpdatedAt = timeOf(created), timeOf(updated)
	return &a, err
}

// AccountGet returns an account, or store.ErrNotFound.
func (q *querier) AccountGet(ctx context.Context, name string) (*domain.Account, error) {
	a, err := scanAccount(q.db.QueryRow(ctx, sqlAccountGet, name))
	if err != nil {
		return nil, translate(err, "get account %s", name)
	}
	return a, nil
}

// AccountList returns every account, by name.
func (q *querier) AccountList(ctx context.Context) ([]*domain.Account, error) {
	rows, err := q.db.Query(ctx, sqlAccountList)
	if err != nil {
		return nil, translate(err, "list accounts")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*domain.Account, error) { return scanAccount(r) })
	if err != nil {
		return nil, translate(err, "list accounts")
	}
	return out, nil
}

// AccountUpdate writes an account's settings.
func (q *querier) AccountUpdate(ctx context.Context, a *domain.Account) error {
	tag, err := q.db.Exec(ctx, sqlAccountUpdate, a.Name, a.Admin, a.Disabled, a.Weight, a.MaxRunning, a.MaxJobs, a.MaxStorage, timeArg(a.UpdatedAt))
	if err == nil && tag.RowsAffected() == 0 {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return translate(err, "update account %s", a.Name)
	}
	return nil
}

// AccountLock returns an account and locks its row until the
// transaction ends.
func (q *querier) AccountLock(ctx context.Context, name string) (*domain.Account, error) {
	a, err := scanAccount(q.db.QueryRow(ctx, sqlAccountLock, name))
	if err != nil {
		return nil, translate(err, "lock account %s", name)
	}
	return a, nil
}

// JobCountUnfinished counts an account's pending and running jobs.
func (q *querier) JobCountUnfinished(ctx context.Context, owner string) (int, error) {
	var n int
	if err := q.db.QueryRow(ctx, sqlJobCountUnfinished, owner).Scan(&n); err != nil {
		return 0, translate(err, "count the unfinished jobs of %s", owner)
	}
	return n, nil
}

// UploadSumBytes sums the bytes of an account's uploads.
func (q *querier) UploadSumBytes(ctx context.Context, owner string) (int64, error) {
	var n int64
	if err := q.db.QueryRow(ctx, sqlUploadSumBytes, owner).Scan(&n); err != nil {
		return 0, translate(err, "sum the uploads of %s", owner)
	}
	return n, nil
}

// TaskCountLeased counts an account's leased tasks that workers run.
func (q *querier) TaskCountLeased(ctx context.Context, owner string) (int, error) {
	var n int
	if err := q.db.QueryRow(ctx, sqlTaskCountLeased, owner).Scan(&n); err != nil {
		return 0, translate(err, "count the leased tasks of %s", owner)
	}
	return n, nil
}

// TaskCountLeasedLocked takes the max_running locks of owners (sqlFairLock,
// in name order) and counts their leased tasks that workers run.
func (q *querier) TaskCountLeasedLocked(ctx context.Context, owners []string) (map[string]int, error) {
	if len(owners) == 0 {
		return nil, nil
	}
	if _, err := q.db.Exec(ctx, sqlFairLock, owners); err != nil {
		return nil, translate(err, "lock the accounts with a max_running")
	}
	rows, err := q.db.Query(ctx, sqlTaskCountLeasedBy, owners)
	if err != nil {
		return nil, translate(err, "count the leased tasks of %d accounts", len(owners))
	}
	return collectByKey[int](rows, "count the leased tasks of %d accounts", len(owners))
}

// AccountTokenInsert records a new token.
func (q *querier) AccountTokenInsert(ctx context.Context, t *store.AccountToken) error {
	if _, err := q.db.Exec(ctx, sqlAccountTokenInsert, t.Hash, t.Account, timeArg(t.CreatedAt), timeArg(t.RevokedAt)); err != nil {
		return translate(err, "insert a token of account %s", t.Account)
	}
	return nil
}

// AccountTokenGet returns a token by its hash, or store.ErrNotFound.
func (q *querier) AccountTokenGet(ctx context.Context, hash string) (*store.AccountToken, error) {
	var (
		t                store.AccountToken
		created, revoked pgtype.Timestamptz
	)
	if err := q.db.QueryRow(ctx, sqlAccountTokenGet, hash).Scan(&t.Hash, &t.Account, &created, &revoked); err != nil {
		return nil, translate(err, "get a token")
	}
	t.CreatedAt, t.RevokedAt = timeOf(created), timeOf(revoked)
	return &t, nil
}

// AccountTokenRevoke revokes an account's tokens but one.
func (q *querier) AccountTokenRevoke(ctx context.Context, p *store.AccountTokenRevokeParams) (int, error) {
	tag, err := q.db.Exec(ctx, sqlAccountTokenRevoke, p.Account, p.Keep, timeArg(p.Now))
	if err != nil {
		return 0, translate(err, "revoke the tokens of account %s", p.Account)
	}
	return int(tag.RowsAffected()), nil
}
