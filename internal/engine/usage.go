package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Accounting (SPEC §9). Each attempt's leased time — from its claim
// (Task.LeasedAt) to the result, failure, release, expiry or cancellation
// that ends it — is charged to the task's owner, with its workload, the
// hour it ended in and the account of the worker that held it. Stitch
// tasks are the coordinators' own work and are not charged.
//
// Every transaction that ends attempts says so (charge) as it ends them;
// the transaction's querier (metered, which tx hands every function)
// sums the charges by key and adds them to the usage table as the
// transaction's last statement (flush): one statement however many
// attempts a batch of results ends. The usage rows are the rows that
// every transaction ending one account's attempts writes, so they are
// locked last, for the commit only, and in one order (see
// store.AccountingQuerier.UsageAdd): a transaction never waits on another
// while holding one.

// usageKey is what a charge is summed by.
type usageKey struct {
	hour                             time.Time
	account, workload, workerAccount string
}

// metered is the Querier tx hands its function: it collects the charges
// of the attempts the transaction ends, and the tasks each worker
// completed (workerDid), for flush.
type metered struct {
	store.Querier
	usage  map[usageKey]*store.UsageRow
	done   map[string]int64 // worker ID → tasks completed
	doneAt time.Time        // when the last of them was
}

// charge records, in the transaction of q (a querier tx handed out), that
// the attempt of t leased at t.LeasedAt ended at end. A lease that ran out
// before end ended when it ran out: call charge before the change that
// ends the attempt clears t's lease expiry.
func charge(q store.Querier, t *domain.Task, end time.Time) {
	m, ok := q.(*metered)
	if !ok {
		panic("engine: an attempt ended outside Engine.tx, so its time cannot be charged")
	}
	m.charge(t, end)
}

// chargeSecond charges, in the transaction of q, the attempt in t's
// second lease (domain.SecondTask), live or lapsed, as ended at now: the
// change about to be made ends the whole task, that attempt with it.
func chargeSecond(q store.Querier, t *domain.Task, now time.Time) {
	if s := domain.SecondTask(t); s != nil {
		charge(q, s, now)
	}
}

// chargeLapsed charges, in the transaction of q, the attempt in t's
// second lease (domain.SecondTask) when that lease ran out by now: the
// change about to be made drops it, and nothing else would charge it.
func chargeLapsed(q store.Querier, t *domain.Task, now time.Time) {
	if s := domain.SecondTask(t); s != nil && !now.Before(s.LeaseExpiresAt) {
		charge(q, s, now)
	}
}

func (m *metered) charge(t *domain.Task, end time.Time) {
	if t.Kind == domain.KindStitch || t.LeasedAt.IsZero() || t.LeaseOwner == domain.QuorumLeaseOwner {
		return // the coordinators' own work; or leased before leases were timed; or a vote, whose replicas are charged
	}
	if !t.LeaseExpiresAt.IsZero() && t.LeaseExpiresAt.Before(end) {
		end = t.LeaseExpiresAt
	}
	k := usageKey{hour: end.UTC().Truncate(time.Hour), account: t.Owner, workload: t.Workload, workerAccount: domain.WorkerAccountOf(t.LeaseOwner)}
	r := m.usage[k]
	if r == nil {
		if m.usage == nil {
			m.usage = map[usageKey]*store.UsageRow{}
		}
		r = &store.UsageRow{Hour: k.hour, Account: k.account, Workload: k.workload, WorkerAccount: k.workerAccount}
		m.usage[k] = r
	}
	r.Tasks++
	r.WorkerMicros += max(end.Sub(t.LeasedAt), 0).Microseconds()
}

// flush adds the charges collected to the usage table, in one statement,
// then the tasks completed to their workers' rows, in another: every
// transaction takes the rows of both in the same order.
func (m *metered) flush(ctx context.Context) error {
	if err := m.flushUsage(ctx); err != nil {
		return err
	}
	if err := m.Querier.WorkerAddDone(ctx, m.done, m.doneAt); err != nil {
		return fmt.Errorf("count the tasks workers completed: %w", err)
	}
	return nil
}

func (m *metered) flushUsage(ctx context.Context) error {
	if len(m.usage) == 0 {
		return nil
	}
	rows := make([]store.UsageRow, 0, len(m.usage))
	for _, r := range m.usage {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b store.UsageRow) int {
		return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Account, b.Account),
			cmp.Compare(a.Workload, b.Workload), cmp.Compare(a.WorkerAccount, b.WorkerAccount))
	})
	if err := m.Querier.UsageAdd(ctx, rows); err != nil {
		return fmt.Errorf("charge the attempts' time: %w", err)
	}
	return nil
}

// UsageField is a field GET /usage groups by.
type UsageField string

// The fields usage can be grouped by.
const (
	UsageAccount       UsageField = "account"
	UsageWorkload      UsageField = "workload"
	UsageDay           UsageField = "day"
	UsageWorkerAccount UsageField = "worker_account"
)

// usageFields are the UsageFields, in the order SPEC §9 lists them.
var usageFields = []UsageField{UsageAccount, UsageWorkload, UsageDay, UsageWorkerAccount}

// ListUsageParams says which usage to sum, and by what.
type ListUsageParams struct {
	Since, Until time.Time    // zero Since: from the start; zero Until: up to now
	By           []UsageField // at least one, each once
}

// ParseListUsage reads the query of GET /usage: since and until are RFC
// 3339 times or dates (midnight UTC), either may be empty; by is a
// comma-separated list of fields, "" for account. Bad input is
// ErrInvalidArgument.
func ParseListUsage(since, until, by string) (ListUsageParams, error) {
	var p ListUsageParams
	var err error
	if p.Since, err = ParseInstant("since", since); err != nil {
		return p, err
	}
	if p.Until, err = ParseInstant("until", until); err != nil {
		return p, err
	}
	if by == "" {
		by = string(UsageAccount)
	}
	for f := range strings.SplitSeq(by, ",") {
		u := UsageField(strings.TrimSpace(f))
		if !slices.Contains(usageFields, u) {
			return p, domain.Invalidf("by: %q is not a field of usage; give any of account, workload, day, worker_account, comma-separated", f)
		}
		if slices.Contains(p.By, u) {
			return p, domain.Invalidf("by: %s is named twice", u)
		}
		p.By = append(p.By, u)
	}
	return p, nil
}

// ParseInstant reads an RFC 3339 time or a date (midnight UTC), as GET
// /usage and GET /audit take them; "" is the zero time. Bad input is
// ErrInvalidArgument naming name.
func ParseInstant(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, domain.Invalidf("%s %q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a date (2006-01-02)", name, s)
}

// UsageEntry is the usage of one group: the fields grouped by are set,
// the others empty.
type UsageEntry struct {
	Account       string
	Workload      string
	Day           string // YYYY-MM-DD, UTC
	WorkerAccount string
	Tasks         int64   // attempts that ended
	WorkerSeconds float64 // their leased time
}

// ListUsage returns the leased time of the attempts that ended in the
// hours overlapping [p.Since, p.Until), grouped by p.By, sorted by the
// fields of p.By in their order. Usage is kept per hour, so Since counts
// from the start of its hour. An admin sees everyone's usage, any other
// caller its own jobs' only.
func (e *Engine) ListUsage(ctx context.Context, p ListUsageParams) ([]UsageEntry, error) {
	if len(p.By) == 0 {
		p.By = []UsageField{UsageAccount}
	}
	c := domain.CallerOf(ctx)
	account := ""
	if !c.Admin {
		account = c.Account
	}
	days, err := e.usageDays(ctx, p, account)
	if err != nil {
		return nil, err
	}
	return sumUsage(days, p.By), nil
}

// ListWorkerUsage returns what workers did in the hours overlapping
// [p.Since, p.Until), whoever's jobs they ran: the attempts that ended
// and their leased time, by worker account ("" for the pool), sorted by
// it; p.By is not read. An admin sees every worker account's; any other
// caller what the workers of its own keys did, and no more of the jobs
// they ran than that.
func (e *Engine) ListWorkerUsage(ctx context.Context, p ListUsageParams) ([]UsageEntry, error) {
	days, err := e.usageDays(ctx, p, "")
	if err != nil {
		return nil, err
	}
	if c := domain.CallerOf(ctx); !c.Admin {
		days = slices.DeleteFunc(days, func(d store.UsageRow) bool { return d.WorkerAccount != c.Account })
	}
	return sumUsage(days, []UsageField{UsageWorkerAccount}), nil
}

// usageDays reads the usage of the days overlapping [p.Since, p.Until),
// of account's jobs ("" for everyone's).
func (e *Engine) usageDays(ctx context.Context, p ListUsageParams, account string) ([]store.UsageRow, error) {
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Since.Before(p.Until) {
		return nil, domain.Invalidf("since (%s) must be before until (%s)", p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339))
	}
	if p.Until.IsZero() {
		p.Until = e.now()
	}
	days, err := e.store.UsageListDays(ctx, &store.UsageListDaysParams{Since: p.Since.Truncate(time.Hour), Until: p.Until, Account: account})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list usage: %w", err))
	}
	return days, nil
}

// sumUsage sums days by the fields of by, sorted by them in their order.
func sumUsage(days []store.UsageRow, by []UsageField) []UsageEntry {
	type sum struct {
		tasks, micros int64
	}
	groups := map[UsageEntry]*sum{}
	var order []UsageEntry
	for _, d := range days {
		var k UsageEntry
		for _, f := range by {
			switch f {
			case UsageAccount:
				k.Account = d.Account
			case UsageWorkload:
				k.Workload = d.Workload
			case UsageDay:
				k.Day = d.Hour.Format(time.DateOnly)
			case UsageWorkerAccount:
				k.WorkerAccount = d.WorkerAccount
			}
		}
		s := groups[k]
		if s == nil {
			s = &sum{}
			groups[k] = s
			order = append(order, k)
		}
		s.tasks += d.Tasks
		s.micros += d.WorkerMicros
	}
	out := make([]UsageEntry, len(order))
	for i, k := range order {
		s := groups[k]
		k.Tasks, k.WorkerSeconds = s.tasks, float64(s.micros)/1e6
		out[i] = k
	}
	slices.SortFunc(out, func(a, b UsageEntry) int {
		for _, f := range by {
			if c := strings.Compare(a.field(f), b.field(f)); c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

// field returns the value of field f of u.
func (u UsageEntry) field(f UsageField) string {
	switch f {
	case UsageAccount:
		return u.Account
	case UsageWorkload:
		return u.Workload
	case UsageDay:
		return u.Day
	}
	return u.WorkerAccount
}
