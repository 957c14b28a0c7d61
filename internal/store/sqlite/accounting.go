package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"slices"

	"github.com/scimesh/scimesh/internal/store"
)

// Usage and the audit trail. Rows come in as one JSON array, so that one
// prepared statement serves any number of them.

// dayMicros is a day in microseconds, the unit of times.
const dayMicros = 86_400_000_000

var (
	// ?1 is a JSON array of [hour, account, workload, worker account,
	// tasks, µs] rows. The GROUP BY adds up rows of one key before the
	// upsert.
	sqlUsageAdd = newStatement(`INSERT INTO usage (hour, account, workload, worker_account, tasks, worker_us)
	SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, sum(value ->> 4), sum(value ->> 5)
	FROM json_each(?1) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
	ON CONFLICT (hour, account, workload, worker_account) DO UPDATE
	SET tasks = tasks + excluded.tasks, worker_us = worker_us + excluded.worker_us`)
	// sqlUsageAddOne is sqlUsageAdd of one row, the common case (a
	// transaction's charges are summed by key before they come here), at a
	// fraction of its cost: no JSON, no sort.
	sqlUsageAddOne = newStatement(`INSERT INTO usage (hour, account, workload, worker_account, tasks, worker_us)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6)
	ON CONFLICT (hour, account, workload, worker_account) DO UPDATE
	SET tasks = tasks + excluded.tasks, worker_us = worker_us + excluded.worker_us`)
	sqlUsageListDays = newStatement(`SELECT hour / ?4 * ?4 AS day, account, workload, worker_account, sum(tasks), sum(worker_us)
	FROM usage WHERE hour >= ?1 AND hour < ?2 AND (?3 = '' OR account = ?3)
	GROUP BY day, account, workload, worker_account
	ORDER BY day, account, workload, worker_account`)
	sqlUsageDelete = newStatement(`DELETE FROM usage WHERE (hour, account, workload, worker_account) IN (
	SELECT hour, account, workload, worker_account FROM usage WHERE hour < ?1 ORDER BY hour LIMIT ?2)`)

	// ?1 is a JSON array of [at, account, action, target, detail] rows,
	// inserted in order, so that their IDs ascend in it.
	sqlAuditInsert = newStatement(`INSERT INTO audit (at, account, action, target, detail)
	SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?1) WHERE true ORDER BY key
	RETURNING id`)
	sqlAuditList = newStatement(`SELECT id, at, account, action, target, detail FROM audit
	WHERE at >= ?1 AND (at, id) < (?2, ?3)
	ORDER BY at DESC, id DESC LIMIT ?4`)
	sqlAuditDelete = newStatement(`DELETE FROM audit WHERE id IN (
	SELECT id FROM audit WHERE at < ?1 ORDER BY at LIMIT ?2)`)
)

// UsageAdd adds rows to the usage of their keys, in one statement.
func (q *querier) UsageAdd(ctx context.Context, rows []store.UsageRow) error {
	if len(rows) == 0 {
		return nil
	}
	if len(rows) == 1 {
		r := rows[0]
		if _, err := q.exec(ctx, sqlUsageAddOne, r.Hour.UnixMicro(), r.Account, r.Workload, r.WorkerAccount, r.Tasks, r.WorkerMicros); err != nil {
			return translate(err, "add the usage of account %s", r.Account)
		}
		return nil
	}
	arr := make([][6]any, len(rows))
	for i, r := range rows {
		arr[i] = [6]any{r.Hour.UnixMicro(), r.Account, r.Workload, r.WorkerAccount, r.Tasks, r.WorkerMicros}
	}
	b, _ := json.Marshal(arr) // integers and strings always encode
	if _, err := q.exec(ctx, sqlUsageAdd, string(b)); err != nil {
		return translate(err, "add the usage of %d keys (first account %s)", len(rows), rows[0].Account)
	}
	return nil
}

// UsageListDays sums the usage of an interval by day, account, workload
// and worker account.
func (q *querier) UsageListDays(ctx context.Context, p *store.UsageListDaysParams) ([]store.UsageRow, error) {
	var out []store.UsageRow
	err := q.query(ctx, false, func(r scanner) error {
		var (
			u   store.UsageRow
			day sql.NullInt64
		)
		if err := r.Scan(&day, &u.Account, &u.Workload, &u.WorkerAccount, &u.Tasks, &u.WorkerMicros); err != nil {
			return err
		}
		u.Hour = timeOf(day)
		out = append(out, u)
		return nil
	}, sqlUsageListDays, p.Since.UnixMicro(), p.Until.UnixMicro(), p.Account, dayMicros)
	if err != nil {
		return nil, translate(err, "list usage")
	}
	return out, nil
}

// UsageDelete deletes a batch of the usage of hours before p.Before.
func (q *querier) UsageDelete(ctx context.Context, p *store.UsageDeleteParams) (int, error) {
	return q.deleted(ctx, "delete usage", sqlUsageDelete, p.Before.UnixMicro(), p.Limit)
}

// AuditInsert records entries, in one statement, and sets their IDs.
func (q *querier) AuditInsert(ctx context.Context, entries []*store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	arr := make([][5]any, len(entries))
	for i, e := range entries {
		arr[i] = [5]any{e.At.UnixMicro(), e.Account, e.Action, e.Target, e.Detail}
	}
	b, _ := json.Marshal(arr) // integers and strings always encode
	ids := make([]int64, 0, len(entries))
	err := q.query(ctx, true, func(r scanner) error {
		var id int64
		ids = append(ids, id)
		return r.Scan(&ids[len(ids)-1])
	}, sqlAuditInsert, string(b))
	if err == nil && len(ids) != len(entries) {
		err = sql.ErrNoRows
	}
	if err != nil {
		return translate(err, "record %d audit entries (first %s)", len(entries), entries[0].Action)
	}
	// RETURNING gives no order; the IDs were handed out in the order of
	// the rows.
	slices.Sort(ids)
	for i, e := range entries {
		e.ID = ids[i]
	}
	return nil
}

// AuditList returns a page of the audit trail, newest first.
func (q *querier) AuditList(ctx context.Context, p *store.AuditListParams) ([]*store.AuditEntry, error) {
	since := int64(math.MinInt64)
	if !p.Since.IsZero() {
		since = p.Since.UnixMicro()
	}
	beforeAt, beforeID := int64(math.MaxInt64), int64(math.MaxInt64)
	if p.After != nil {
		beforeAt, beforeID = p.After.At.UnixMicro(), p.After.ID
	}
	var out []*store.AuditEntry
	err := q.query(ctx, false, func(r scanner) error {
		var (
			e  store.AuditEntry
			at sql.NullInt64
		)
		if err := r.Scan(&e.ID, &at, &e.Account, &e.Action, &e.Target, &e.Detail); err != nil {
			return err
		}
		e.At = timeOf(at)
		out = append(out, &e)
		return nil
	}, sqlAuditList, since, beforeAt, beforeID, p.Limit)
	if err != nil {
		return nil, translate(err, "list the audit trail")
	}
	return out, nil
}

// AuditDelete deletes a batch of the entries before p.Before.
func (q *querier) AuditDelete(ctx context.Context, p *store.AuditDeleteParams) (int, error) {
	return q.deleted(ctx, "delete audit entries", sqlAuditDelete, p.Before.UnixMicro(), p.Limit)
}

// deleted runs a delete statement and returns how many rows it deleted.
func (q *querier) deleted(ctx context.Context, what string, query *statement, args ...any) (int, error) {
	res, err := q.exec(ctx, query, args...)
	if err != nil {
		return 0, translate(err, "%s", what)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, translate(err, "%s", what)
	}
	return int(n), nil
}
