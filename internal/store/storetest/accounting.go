package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/store"
)

// exerciseAccounting runs the tests of usage and the audit trail.
func exerciseAccounting(t *testing.T, newStore newFunc) {
	t.Run("Usage", func(t *testing.T) { t.Parallel(); exerciseUsage(t, newStore) })
	t.Run("UsageConcurrent", func(t *testing.T) { t.Parallel(); exerciseUsageConcurrent(t, newStore) })
	t.Run("Audit", func(t *testing.T) { t.Parallel(); exerciseAudit(t, newStore) })
}

// exerciseUsage: additions to one key add up, in one call as across
// calls; a listing sums the hours of [Since, Until) by day, account,
// workload and worker account, in that order, of one account when asked;
// a delete takes the hours before its cutoff, a batch at a time.
func exerciseUsage(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	day := Epoch().Truncate(24 * time.Hour)
	h := func(n int) time.Time { return day.Add(time.Duration(n) * time.Hour) }
	row := func(hour time.Time, account, workload, worker string, tasks, micros int64) store.UsageRow {
		return store.UsageRow{Hour: hour, Account: account, Workload: workload, WorkerAccount: worker, Tasks: tasks, WorkerMicros: micros}
	}
	if err := s.UsageAdd(ctx, nil); err != nil {
		t.Errorf("UsageAdd(nil): %v", err)
	}
	adds := [][]store.UsageRow{
		{row(h(1), "ada", "tanimoto", "", 1, 1_500_000), row(h(1), "ada", "tanimoto", "", 2, 500_000), row(h(2), "bob", "dock", "", 1, 7)},
		{row(h(3), "ada", "tanimoto", "", 1, 1_000_000), row(h(1), "ada", "tanimoto", "", 1, 1)},
		{row(h(1), "ada", "tanimoto", "lab-b", 4, 40)},
		{row(h(25), "ada", "tanimoto", "", 5, 50)}, // the next day
		{row(h(-1), "ada", "tanimoto", "", 6, 60)}, // the day before
		{row(h(49), "bob", "tanimoto", "", 9, 90)}, // two days later
	}
	for _, a := range adds {
		if err := s.UsageAdd(ctx, a); err != nil {
			t.Fatalf("UsageAdd(%v): %v", a, err)
		}
	}
	list := func(p store.UsageListDaysParams) []store.UsageRow {
		t.Helper()
		got, err := s.UsageListDays(ctx, &p)
		if err != nil {
			t.Fatalf("UsageListDays(%+v): %v", p, err)
		}
		return got
	}
	check := func(what string, got, want []store.UsageRow) {
		t.Helper()
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	d := func(n int) time.Time { return day.Add(time.Duration(n) * 24 * time.Hour) }
	check("the first day", list(store.UsageListDaysParams{Since: d(0), Until: d(1)}), []store.UsageRow{
		row(d(0), "ada", "tanimoto", "", 5, 3_000_001),
		row(d(0), "ada", "tanimoto", "lab-b", 4, 40),
		row(d(0), "bob", "dock", "", 1, 7),
	})
	check("every day", list(store.UsageListDaysParams{Since: d(-1), Until: d(3)}), []store.UsageRow{
		row(d(-1), "ada", "tanimoto", "", 6, 60),
		row(d(0), "ada", "tanimoto", "", 5, 3_000_001),
		row(d(0), "ada", "tanimoto", "lab-b", 4, 40),
		row(d(0), "bob", "dock", "", 1, 7),
		row(d(1), "ada", "tanimoto", "", 5, 50),
		row(d(2), "bob", "tanimoto", "", 9, 90),
	})
	// Pinned: the interval is by hour, Since included and Until not.
	check("hours 2 to 3", list(store.UsageListDaysParams{Since: h(2), Until: h(3)}), []store.UsageRow{row(d(0), "bob", "dock", "", 1, 7)})
	check("ada's", list(store.UsageListDaysParams{Since: d(0), Until: d(2), Account: "ada"}), []store.UsageRow{
		row(d(0), "ada", "tanimoto", "", 5, 3_000_001),
		row(d(0), "ada", "tanimoto", "lab-b", 4, 40),
		row(d(1), "ada", "tanimoto", "", 5, 50),
	})
	check("carl's", list(store.UsageListDaysParams{Since: d(-10), Until: d(10), Account: "carl"}), nil)

	// Six keys before the cutoff (two days later's is after it), two at
	// a time.
	cutoff := d(2)
	total := 0
	for range 10 {
		n, err := s.UsageDelete(ctx, &store.UsageDeleteParams{Before: cutoff, Limit: 2})
		if err != nil {
			t.Fatalf("UsageDelete: %v", err)
		}
		if n > 2 {
			t.Errorf("UsageDelete of at most 2 deleted %d", n)
		}
		total += n
		if n == 0 {
			break
		}
	}
	if total != 6 {
		t.Errorf("UsageDelete deleted %d rows in all, want 6", total)
	}
	check("after the deletes", list(store.UsageListDaysParams{Since: d(-10), Until: d(10)}), []store.UsageRow{row(d(2), "bob", "tanimoto", "", 9, 90)})
}

// exerciseUsageConcurrent: additions to one key from concurrent
// transactions all count.
func exerciseUsageConcurrent(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	hour := Epoch().Truncate(time.Hour)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				err := inTxRetry(ctx, s, func(q store.Querier) error {
					return q.UsageAdd(ctx, []store.UsageRow{
						{Hour: hour, Account: "ada", Workload: "w", Tasks: 1, WorkerMicros: 3},
						{Hour: hour, Account: "bob", Workload: "w", Tasks: 1, WorkerMicros: 5},
					})
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("UsageAdd: %v", err)
	}
	got, err := s.UsageListDays(ctx, &store.UsageListDaysParams{Since: hour, Until: hour.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	day := hour.Truncate(24 * time.Hour)
	want := []store.UsageRow{
		{Hour: day, Account: "ada", Workload: "w", Tasks: writers * each, WorkerMicros: 3 * writers * each},
		{Hour: day, Account: "bob", Workload: "w", Tasks: writers * each, WorkerMicros: 5 * writers * each},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after %d concurrent additions:\n got %+v\nwant %+v", writers*each, got, want)
	}
}

// inTxRetry runs fn in a transaction of s, again while it is stale (at
// most 100 times), as the engine does.
func inTxRetry(ctx context.Context, s store.Store, fn func(q store.Querier) error) error {
	for range 100 {
		if err := s.InTx(ctx, fn); !errors.Is(err, store.ErrStale) {
			return err
		}
	}
	return fmt.Errorf("still stale after 100 runs: %w", store.ErrStale)
}

// exerciseAudit: entries get ascending IDs and read back as written,
// newest first, from Since on, page by page after a cursor (entries of
// one instant by ID); a delete takes those before its cutoff, a batch at
// a time.
func exerciseAudit(t *testing.T, newStore newFunc) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.AuditInsert(ctx, nil); err != nil {
		t.Errorf("AuditInsert(nil): %v", err)
	}
	at := func(n int) time.Time { return Epoch().Add(time.Duration(n) * time.Minute) }
	entries := []*store.AuditEntry{
		{At: at(0), Account: "admin", Action: "account.create", Target: "ada", Detail: "weight 2"},
		{At: at(1), Account: "ada", Action: "upload.create", Target: "s0:u1", Detail: ""},
		{At: at(1), Account: "ada", Action: "job.create", Target: "s0:j1", Detail: "tanimoto, 3 chunks"},
		{At: at(2), Account: "", Action: "job.delete", Target: "s0:j0", Detail: "retention"},
	}
	if err := s.AuditInsert(ctx, entries[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.AuditInsert(ctx, entries[1:]); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].ID <= entries[i-1].ID {
			t.Errorf("entry %d has ID %d, not above %d of the one before", i, entries[i].ID, entries[i-1].ID)
		}
	}
	list := func(p store.AuditListParams) []*store.AuditEntry {
		t.Helper()
		got, err := s.AuditList(ctx, &p)
		if err != nil {
			t.Fatalf("AuditList(%+v): %v", p, err)
		}
		return got
	}
	check := func(what string, got []*store.AuditEntry, want ...*store.AuditEntry) {
		t.Helper()
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("every entry", list(store.AuditListParams{Limit: 10}), entries[3], entries[2], entries[1], entries[0])
	check("since minute 1", list(store.AuditListParams{Since: at(1), Limit: 10}), entries[3], entries[2], entries[1])
	page := list(store.AuditListParams{Limit: 2})
	check("the first page", page, entries[3], entries[2])
	cur := &store.AuditCursor{At: page[1].At, ID: page[1].ID}
	check("the second page", list(store.AuditListParams{After: cur, Limit: 2}), entries[1], entries[0])
	check("the second page since minute 1", list(store.AuditListParams{Since: at(1), After: cur, Limit: 2}), entries[1])

	n, err := s.AuditDelete(ctx, &store.AuditDeleteParams{Before: at(2), Limit: 2})
	if err != nil || n != 2 {
		t.Errorf("AuditDelete of 2 before minute 2: %d, %v; want 2", n, err)
	}
	n, err = s.AuditDelete(ctx, &store.AuditDeleteParams{Before: at(2), Limit: 2})
	if err != nil || n != 1 {
		t.Errorf("AuditDelete of the rest before minute 2: %d, %v; want 1", n, err)
	}
	check("after the deletes", list(store.AuditListParams{Limit: 10}), entries[3])
}
