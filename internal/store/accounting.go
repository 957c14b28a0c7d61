package store

import (
	"context"
	"time"
)

// AccountingQuerier is the part of the contract that keeps what accounts
// used and what was done: the leased time of ended attempts (usage) and
// the audit trail. It is embedded in Querier.
//
// Usage is kept as sums, a row per hour, account, workload and worker
// account, added to by the transactions that end attempts: it grows with
// time and the number of accounts, never with the number of attempts.
type AccountingQuerier interface {
	// UsageAdd adds each of rows to the row of its key (Hour, Account,
	// Workload, WorkerAccount), creating it when new, in one statement;
	// rows of one key are added together. Hour must be a whole UTC hour.
	UsageAdd(ctx context.Context, rows []UsageRow) error
	// UsageListDays returns the usage of the hours in [p.Since, p.Until)
	// (of p.Account alone when it is set) summed by UTC day, account,
	// workload and worker account, in that order; each row's Hour is the
	// start of its day.
	UsageListDays(ctx context.Context, p *UsageListDaysParams) ([]UsageRow, error)
	// UsageDelete deletes up to p.Limit rows of hours before p.Before and
	// returns how many it deleted.
	UsageDelete(ctx context.Context, p *UsageDeleteParams) (int, error)

	// AuditInsert records entries and sets the ID of each, greater than
	// every ID before it.
	AuditInsert(ctx context.Context, entries []*AuditEntry) error
	// AuditList returns up to p.Limit entries of At at or after p.Since,
	// newest first (At, then ID, descending), after p.After when set.
	AuditList(ctx context.Context, p *AuditListParams) ([]*AuditEntry, error)
	// AuditDelete deletes up to p.Limit entries of At before p.Before and
	// returns how many it deleted.
	AuditDelete(ctx context.Context, p *AuditDeleteParams) (int, error)
}

// UsageRow is the leased time of the attempts of one account's tasks of
// one workload, run by workers of one account, that ended in one hour
// (or one day, as UsageListDays sums them).
type UsageRow struct {
	Hour          time.Time // the start of the hour (or day), UTC
	Account       string    // the tasks' owner
	Workload      string
	WorkerAccount string // the workers' account; "" for the installation's own pool
	Tasks         int64  // attempts that ended
	WorkerMicros  int64  // their leased time, in microseconds
}

// UsageListDaysParams selects the hours whose usage UsageListDays sums.
type UsageListDaysParams struct {
	Since, Until time.Time
	Account      string // "" for every account
}

// UsageDeleteParams says which usage to delete, and how much at once.
type UsageDeleteParams struct {
	Before time.Time
	Limit  int // rows at most, at least 1
}

// AuditEntry is one thing done, by whom and to what.
type AuditEntry struct {
	ID      int64
	At      time.Time
	Account string // who did it; "" for the coordinator itself (retention)
	Action  string // what was done, e.g. "job.cancel"
	Target  string // to what: a job's or upload's ID, an account's name
	Detail  string // more, for people
}

// AuditCursor is the position of an entry in AuditList's order.
type AuditCursor struct {
	At time.Time
	ID int64
}

// AuditListParams selects a page of the audit trail.
type AuditListParams struct {
	Since time.Time    // zero: from the oldest
	After *AuditCursor // nil from the newest
	Limit int          // at least 1
}

// AuditDeleteParams says which entries to delete, and how many at once.
type AuditDeleteParams struct {
	Before time.Time
	Limit  int // entries at most, at least 1
}
