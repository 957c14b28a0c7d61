package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/store"
)

// Usage and the audit trail.

const (
	// The GROUP BY adds up rows of one key, which one INSERT … ON
	// CONFLICT may not update twice; the ORDER BY takes the row locks of
	// concurrent additions in one order, so that they queue rather than
	// deadlock.
	sqlUsageAdd = `INSERT INTO usage (hour, account, workload, worker_account, tasks, worker_us)
SELECT hour, account, workload, worker_account, sum(tasks)::bigint, sum(worker_us)::bigint
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
	AS u(hour, account, workload, worker_account, tasks, worker_us)
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
ON CONFLICT (hour, account, workload, worker_account) DO UPDATE
SET tasks = usage.tasks + excluded.tasks, worker_us = usage.worker_us + excluded.worker_us`
	// sqlUsageAddOne is sqlUsageAdd of one row, the common case (a
	// transaction's charges are summed by key before they come here),
	// without the arrays to encode and unnest.
	sqlUsageAddOne = `INSERT INTO usage (hour, account, workload, worker_account, tasks, worker_us)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (hour, account, workload, worker_account) DO UPDATE
SET tasks = usage.tasks + excluded.tasks, worker_us = usage.worker_us + excluded.worker_us`
	sqlUsageListDays = `SELECT date_trunc('day', hour, 'UTC') AS day, account, workload, worker_account,
	sum(tasks)::bigint, sum(worker_us)::bigint
FROM usage WHERE hour >= $1 AND hour < $2 AND ($3 = '' OR account = $3)
GROUP BY day, account, workload, worker_account
ORDER BY day, account, workload, worker_account`
	sqlUsageDelete = `DELETE FROM usage WHERE (hour, account, workload, worker_account) IN (
	SELECT hour, account, workload, worker_account FROM usage WHERE hour < $1 ORDER BY hour LIMIT $2)`

	// Rows are inserted in the order of the arrays, so that their IDs
	// ascend in it.
	sqlAuditInsert = `INSERT INTO audit (at, account, action, target, detail)
SELECT at, account, action, target, detail
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY
	AS e(at, account, action, target, detail, n)
ORDER BY n
RETURNING id`
	auditColumns   = `id, at, account, action, target, detail`
	sqlAuditList   = `SELECT ` + auditColumns + ` FROM audit WHERE at >= $1 ORDER BY at DESC, id DESC LIMIT $2`
	sqlAuditListAt = `SELECT ` + auditColumns + ` FROM audit WHERE at >= $1 AND (at, id) < ($3, $4)
ORDER BY at DESC, id DESC LIMIT $2`
	sqlAuditDelete = `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < $1 ORDER BY at LIMIT $2)`
)

// UsageAdd adds rows to the usage of their keys, in one statement.
func (q *querier) UsageAdd(ctx context.Context, rows []store.UsageRow) error {
	if len(rows) == 0 {
		return nil
	}
	if len(rows) == 1 {
		r := rows[0]
		if _, err := q.db.Exec(ctx, sqlUsageAddOne, r.Hour, r.Account, r.Workload, r.WorkerAccount, r.Tasks, r.WorkerMicros); err != nil {
			return translate(err, "add the usage of account %s", r.Account)
		}
		return nil
	}
	var (
		hours                        = make([]time.Time, len(rows))
		accounts, workloads, workers = make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
		tasks, micros                = make([]int64, len(rows)), make([]int64, len(rows))
	)
	for i, r := range rows {
		hours[i], accounts[i], workloads[i], workers[i], tasks[i], micros[i] = r.Hour, r.Account, r.Workload, r.WorkerAccount, r.Tasks, r.WorkerMicros
	}
	if _, err := q.db.Exec(ctx, sqlUsageAdd, hours, accounts, workloads, workers, tasks, micros); err != nil {
		return translate(err, "add the usage of %d keys (first account %s)", len(rows), rows[0].Account)
	}
	return nil
}

// UsageListDays sums the usage of an interval by day, account, workload
// and worker account.
func (q *querier) UsageListDays(ctx context.Context, p *store.UsageListDaysParams) ([]store.UsageRow, error) {
	rows, err := q.db.Query(ctx, sqlUsageListDays, p.Since, p.Until, p.Account)
	if err != nil {
		return nil, translate(err, "list usage")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.UsageRow, error) {
		var (
			u   store.UsageRow
			day pgtype.Timestamptz
		)
		err := r.Scan(&day, &u.Account, &u.Workload, &u.WorkerAccount, &u.Tasks, &u.WorkerMicros)
		u.Hour = timeOf(day)
		return u, err
	})
	if err != nil {
		return nil, translate(err, "list usage")
	}
	return out, nil
}

// UsageDelete deletes a batch of the usage of hours before p.Before.
func (q *querier) UsageDelete(ctx context.Context, p *store.UsageDeleteParams) (int, error) {
	tag, err := q.db.Exec(ctx, sqlUsageDelete, p.Before, p.Limit)
	if err != nil {
		return 0, translate(err, "delete usage")
	}
	return int(tag.RowsAffected()), nil
}

// AuditInsert records entries, in one statement, and sets their IDs.
func (q *querier) AuditInsert(ctx context.Context, entries []*store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	var (
		at                                  = make([]time.Time, len(entries))
		accounts, actions, targets, details = make([]string, len(entries)), make([]string, len(entries)), make([]string, len(entries)), make([]string, len(entries))
	)
	for i, e := range entries {
		at[i], accounts[i], actions[i], targets[i], details[i] = e.At, e.Account, e.Action, e.Target, e.Detail
	}
	rows, err := q.db.Query(ctx, sqlAuditInsert, at, accounts, actions, targets, details)
	if err != nil {
		return translate(err, "record %d audit entries (first %s)", len(entries), entries[0].Action)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err == nil && len(ids) != len(entries) {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return translate(err, "record %d audit entries (first %s)", len(entries), entries[0].Action)
	}
	slices.Sort(ids) // handed out in the order of the rows
	for i, e := range entries {
		e.ID = ids[i]
	}
	return nil
}

// AuditList returns a page of the audit trail, newest first.
func (q *querier) AuditList(ctx context.Context, p *store.AuditListParams) ([]*store.AuditEntry, error) {
	since := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	if !p.Since.IsZero() {
		since = pgtype.Timestamptz{Time: p.Since, Valid: true}
	}
	var (
		rows pgx.Rows
		err  error
	)
	if p.After == nil {
		rows, err = q.db.Query(ctx, sqlAuditList, since, p.Limit)
	} else {
		rows, err = q.db.Query(ctx, sqlAuditListAt, since, p.Limit, p.After.At, p.After.ID)
	}
	if err != nil {
		return nil, translate(err, "list the audit trail")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.AuditEntry, error) {
		var (
			e  store.AuditEntry
			at pgtype.Timestamptz
		)
		err := r.Scan(&e.ID, &at, &e.Account, &e.Action, &e.Target, &e.Detail)
		e.At = timeOf(at)
		return &e, err
	})
	if err != nil {
		return nil, translate(err, "list the audit trail")
	}
	return out, nil
}

// AuditDelete deletes a batch of the entries before p.Before.
func (q *querier) AuditDelete(ctx context.Context, p *store.AuditDeleteParams) (int, error) {
	tag, err := q.db.Exec(ctx, sqlAuditDelete, p.Before, p.Limit)
	if err != nil {
		return 0, translate(err, "delete audit entries")
	}
	return int(tag.RowsAffected()), nil
}
