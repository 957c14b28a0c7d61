package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
)

// as is ctx acting as account, not an admin.
func as(ctx context.Context, account string) context.Context {
	return domain.WithCaller(ctx, domain.Caller{Account: account})
}

// claimAll claims every runnable chunk task of workload for worker w, in
// claim order.
func claimAll(t *testing.T, e *engine.Engine, w, workload string) []*engine.TaskView {
	t.Helper()
	tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: w, Workloads: []string{workload}, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

func output(id string) []byte { return fmt.Appendf(nil, "id,score\n%s,1\n", id) }

// TestUsageChargesEveryEnd ends attempts every way one ends — a result, a
// batch of results, a failure, a release, an expiry, a cancellation (of a
// live lease and of one that ran out unnoticed), the cascade of a failure
// for good, a tree task's result, a claim that could not be answered —
// and checks that each is charged to its task's owner, once, for its
// leased time (up to when its lease ran out, if that was earlier), and
// that stitches and replays are not.
func TestUsageChargesEveryEnd(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open func() store.Store) {
		ctx := t.Context()
		s := &argsFailStore{Store: open()}
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		c := enginetest.NewClock(start)
		e := newEngine(s, engine.Config{Shard: "s0", Now: c.Now})
		// Each account's job has a workload of its own, claimed alone.
		create := func(account string, sp *domain.JobSpec) *engine.JobView {
			t.Helper()
			sp.Workload = account
			v, _, err := e.CreateJob(as(ctx, account), sp, "")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		check := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}

		// ada: 6 attempts, 3 + 4 + 4 + 4 + 4 + 60 = 79 s.
		create("ada", spec(6))
		a := claimAll(t, e, "w1", "ada")
		if len(a) != 6 {
			t.Fatalf("claimed %d of ada's tasks, want 6", len(a))
		}
		c.Advance(3 * time.Second)
		_, err := e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: a[0].ID, WorkerID: "w1", Attempt: 1, Output: output(a[0].ID)})
		check("result", err)
		c.Advance(time.Second)
		for _, r := range e.CompleteTasks(ctx, []engine.CompleteTaskParams{
			{TaskID: a[1].ID, WorkerID: "w1", Attempt: 1, Output: output(a[1].ID)},
			{TaskID: a[2].ID, WorkerID: "w1", Attempt: 1, Output: output(a[2].ID)},
		}) {
			check("batch result", r.Err)
		}
		_, err = e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: a[0].ID, WorkerID: "w1", Attempt: 1, Output: output(a[0].ID)})
		check("replayed result", err)
		_, err = e.FailTask(ctx, engine.FailTaskParams{TaskID: a[3].ID, WorkerID: "w1", Attempt: 1, Error: "boom", Retryable: true})
		check("failure", err)
		_, err = e.FailTask(ctx, engine.FailTaskParams{TaskID: a[4].ID, WorkerID: "w1", Attempt: 1, Error: "bye", Release: true})
		check("release", err)
		c.Advance(86 * time.Second) // a[5]'s lease of 60 s ran out 26 s ago
		if n, err := e.ExpireLeases(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
		}

		// bob: a lease renewed once and cancelled live (12 s), and one
		// that ran out unnoticed before the cancellation (10 s).
		sp := spec(2)
		sp.LeaseSeconds = 10
		b := create("bob", sp)
		bt := claimAll(t, e, "w2", "bob")
		if len(bt) != 2 {
			t.Fatalf("claimed %d of bob's tasks, want 2", len(bt))
		}
		c.Advance(5 * time.Second)
		_, err = e.RenewLease(ctx, bt[0].ID, "w2", 1)
		check("heartbeat", err)
		c.Advance(7 * time.Second)
		_, err = e.CancelJob(as(ctx, "bob"), b.ID)
		check("cancel", err)

		// carl: a failure for good at 2 s cancels the other lease.
		sp = spec(2)
		sp.MaxAttempts = 1
		create("carl", sp)
		ct := claimAll(t, e, "w3", "carl")
		if len(ct) != 2 {
			t.Fatalf("claimed %d of carl's tasks, want 2", len(ct))
		}
		c.Advance(2 * time.Second)
		_, err = e.FailTask(ctx, engine.FailTaskParams{TaskID: ct[0].ID, WorkerID: "w3", Attempt: 1, Error: "bad input"})
		check("failure for good", err)

		// dave: a tree task whose claim could not be answered (0 s), then
		// its result after 7 s.
		ids, _, err := e.SubmitTree(as(ctx, "dave"), &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
			{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}},
		}}, nil)
		check("tree", err)
		s.fail.Store(true)
		if task, err := e.PollTree(ctx, "w4", []string{"num"}, 0); err == nil || task != nil {
			t.Fatalf("PollTree that cannot be answered = %+v, %v; want an error", task, err)
		}
		s.fail.Store(false)
		tree, err := e.PollTree(ctx, "w4", []string{"num"}, 0)
		if err != nil || tree == nil || tree.ID != ids["s0:a"] {
			t.Fatalf("PollTree = %+v, %v", tree, err)
		}
		c.Advance(7 * time.Second)
		check("tree result", e.CompleteTree(ctx, tree.ID, "w4", tree.Attempt, json.RawMessage("2")))

		// erin: one chunk of 1 s, then the coordinator's stitch.
		create("erin", spec(1))
		et := claimAll(t, e, "w5", "erin")
		if len(et) != 1 {
			t.Fatalf("claimed %d of erin's tasks, want 1", len(et))
		}
		c.Advance(time.Second)
		_, err = e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: et[0].ID, WorkerID: "w5", Attempt: 1, Output: output(et[0].ID)})
		check("erin's result", err)
		if n, err := e.StitchReadyJobs(ctx); err != nil || n != 1 {
			t.Fatalf("StitchReadyJobs = %d, %v; want erin's job", n, err)
		}

		got, err := e.ListUsage(ctx, engine.ListUsageParams{})
		check("ListUsage", err)
		want := []engine.UsageEntry{
			{Account: "ada", Tasks: 6, WorkerSeconds: 79},
			{Account: "bob", Tasks: 2, WorkerSeconds: 22},
			{Account: "carl", Tasks: 2, WorkerSeconds: 4},
			{Account: "dave", Tasks: 2, WorkerSeconds: 7},
			{Account: "erin", Tasks: 1, WorkerSeconds: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("usage by account:\n got %+v\nwant %+v", got, want)
		}
	})
}

// raceStore runs hook once, on another connection, just after a
// transaction read a job's leased tasks to cancel them.
type raceStore struct {
	store.Store
	once sync.Once
	hook func()
}

func (s *raceStore) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	return s.Store.InTx(ctx, func(q store.Querier) error { return fn(&raceQuerier{Querier: q, s: s}) })
}

type raceQuerier struct {
	store.Querier
	s *raceStore
}

func (q *raceQuerier) TaskList(ctx context.Context, p *store.TaskListParams) ([]*domain.Task, error) {
	tasks, err := q.Querier.TaskList(ctx, p)
	if err == nil && p.State == domain.TaskLeased && len(tasks) > 0 {
		q.s.once.Do(q.s.hook)
	}
	return tasks, err
}

// TestUsageCancelRacingResult completes a task on one coordinator between
// the moment another's cancellation of its job read the task leased and
// the moment it writes: the attempt is charged once, by the result.
// PostgreSQL only, where the two transactions run at once.
func TestUsageCancelRacingResult(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := openPG(t, pgtest.URL(t))
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	other := newEngine(pg, engine.Config{Shard: "s0", Now: c.Now})
	rs := &raceStore{Store: pg}
	e := newEngine(rs, engine.Config{Shard: "s0", Now: c.Now})
	v, _, err := e.CreateJob(as(ctx, "ada"), spec(1), "")
	if err != nil {
		t.Fatal(err)
	}
	tasks := claimAll(t, e, "w", "w")
	if len(tasks) != 1 {
		t.Fatalf("claimed %d tasks, want 1", len(tasks))
	}
	c.Advance(4 * time.Second)
	var resultErr error
	rs.hook = func() {
		_, resultErr = other.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: tasks[0].ID, WorkerID: "w", Attempt: 1, Output: output(tasks[0].ID)})
	}
	if _, err := e.CancelJob(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if resultErr != nil {
		t.Fatalf("the result that raced the cancellation: %v", resultErr)
	}
	got, err := e.ListUsage(ctx, engine.ListUsageParams{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []engine.UsageEntry{{Account: "ada", Tasks: 1, WorkerSeconds: 4}}; !reflect.DeepEqual(got, want) {
		t.Errorf("usage = %+v, want %+v: the attempt charged once", got, want)
	}
}

// TestListUsage groups usage by the fields asked for, in their order,
// shows a caller that is not an admin its own only, and counts the hours
// that overlap [since, until).
func TestListUsage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 3, 3, 0, 30, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now})
	h := func(day, hour int) time.Time { return time.Date(2026, 3, day, hour, 0, 0, 0, time.UTC) }
	err := s.UsageAdd(ctx, []store.UsageRow{
		{Hour: h(1, 10), Account: "ada", Workload: "dock", Tasks: 2, WorkerMicros: 2_000_000},
		{Hour: h(1, 11), Account: "ada", Workload: "tanimoto", Tasks: 1, WorkerMicros: 500_000},
		{Hour: h(1, 11), Account: "bob", Workload: "tanimoto", WorkerAccount: "lab-b", Tasks: 3, WorkerMicros: 1_250_000},
		{Hour: h(2, 23), Account: "ada", Workload: "tanimoto", Tasks: 4, WorkerMicros: 4_000_000},
		{Hour: h(3, 0), Account: "bob", Workload: "dock", Tasks: 1, WorkerMicros: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	list := func(ctx context.Context, since, until, by string) []engine.UsageEntry {
		t.Helper()
		p, err := engine.ParseListUsage(since, until, by)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.ListUsage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		name             string
		ctx              context.Context
		since, until, by string
		want             []engine.UsageEntry
	}{
		{"by account", ctx, "", "", "", []engine.UsageEntry{
			{Account: "ada", Tasks: 7, WorkerSeconds: 6.5},
			{Account: "bob", Tasks: 4, WorkerSeconds: 1.250001},
		}},
		{"by day and account", ctx, "", "", "day,account", []engine.UsageEntry{
			{Day: "2026-03-01", Account: "ada", Tasks: 3, WorkerSeconds: 2.5},
			{Day: "2026-03-01", Account: "bob", Tasks: 3, WorkerSeconds: 1.25},
			{Day: "2026-03-02", Account: "ada", Tasks: 4, WorkerSeconds: 4},
			{Day: "2026-03-03", Account: "bob", Tasks: 1, WorkerSeconds: 0.000001},
		}},
		{"by workload and worker account", ctx, "", "", "workload,worker_account", []engine.UsageEntry{
			{Workload: "dock", Tasks: 3, WorkerSeconds: 2.000001},
			{Workload: "tanimoto", Tasks: 5, WorkerSeconds: 4.5},
			{Workload: "tanimoto", WorkerAccount: "lab-b", Tasks: 3, WorkerSeconds: 1.25},
		}},
		{"ada's own", as(ctx, "ada"), "", "", "account,workload", []engine.UsageEntry{
			{Account: "ada", Workload: "dock", Tasks: 2, WorkerSeconds: 2},
			{Account: "ada", Workload: "tanimoto", Tasks: 5, WorkerSeconds: 4.5},
		}},
		{"carl's own", as(ctx, "carl"), "", "", "", nil},
		// The hour of since counts whole; until is excluded.
		{"from 11:30 on the first to the third", ctx, "2026-03-01T11:30:00Z", "2026-03-03", "account", []engine.UsageEntry{
			{Account: "ada", Tasks: 5, WorkerSeconds: 4.5},
			{Account: "bob", Tasks: 3, WorkerSeconds: 1.25},
		}},
		{"since a time in another zone", ctx, "2026-03-02T00:00:00+01:00", "", "account", []engine.UsageEntry{
			{Account: "ada", Tasks: 4, WorkerSeconds: 4},
			{Account: "bob", Tasks: 1, WorkerSeconds: 0.000001},
		}},
	} {
		if got := list(tc.ctx, tc.since, tc.until, tc.by); !reflect.DeepEqual(got, tc.want) && (len(got) > 0 || len(tc.want) > 0) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestListWorkerUsage sums what workers did by their account, whoever's
// jobs they ran: an admin sees every worker account's, the pool's
// included; an account what its own keys' workers did alone, with other
// accounts' jobs; a period is read as ListUsage reads it.
func TestListWorkerUsage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	e := newEngine(s, engine.Config{Now: enginetest.NewClock(time.Date(2026, 3, 3, 0, 30, 0, 0, time.UTC)).Now})
	h := func(day, hour int) time.Time { return time.Date(2026, 3, day, hour, 0, 0, 0, time.UTC) }
	err := s.UsageAdd(ctx, []store.UsageRow{
		{Hour: h(1, 10), Account: "ada", Workload: "dock", Tasks: 2, WorkerMicros: 2_000_000},
		{Hour: h(1, 11), Account: "bob", Workload: "dock", WorkerAccount: "ada", Tasks: 3, WorkerMicros: 1_500_000},
		{Hour: h(1, 11), Account: "ada", Workload: "dock", WorkerAccount: "ada", Tasks: 1, WorkerMicros: 500_000},
		{Hour: h(2, 9), Account: "ada", Workload: "tanimoto", WorkerAccount: "bob", Tasks: 4, WorkerMicros: 4_000_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		since time.Time
		want  []engine.UsageEntry
	}{
		{"the admin's", ctx, time.Time{}, []engine.UsageEntry{
			{Tasks: 2, WorkerSeconds: 2},
			{WorkerAccount: "ada", Tasks: 4, WorkerSeconds: 2},
			{WorkerAccount: "bob", Tasks: 4, WorkerSeconds: 4},
		}},
		{"ada's machines', for bob's jobs too", as(ctx, "ada"), time.Time{}, []engine.UsageEntry{{WorkerAccount: "ada", Tasks: 4, WorkerSeconds: 2}}},
		{"bob's machines', for ada's jobs", as(ctx, "bob"), time.Time{}, []engine.UsageEntry{{WorkerAccount: "bob", Tasks: 4, WorkerSeconds: 4}}},
		{"carl's, who has none", as(ctx, "carl"), time.Time{}, nil},
		{"ada's since the second", as(ctx, "ada"), h(2, 0), nil},
	} {
		got, err := e.ListWorkerUsage(tc.ctx, engine.ListUsageParams{Since: tc.since})
		if err != nil || !reflect.DeepEqual(got, tc.want) && (len(got) > 0 || len(tc.want) > 0) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := e.ListWorkerUsage(ctx, engine.ListUsageParams{Since: h(2, 0), Until: h(1, 0)}); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("since after until: %v, want ErrInvalidArgument", err)
	}
}

// TestParseListUsage refuses what GET /usage cannot mean.
func TestParseListUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ since, until, by string }{
		{by: "owner"}, {by: "account,account"}, {by: "account,"}, {since: "yesterday"}, {until: "2026-13-01"},
		{since: "2026-03-01T10:00:00"}, // no zone
	} {
		if _, err := engine.ParseListUsage(tc.since, tc.until, tc.by); !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("ParseListUsage(%q, %q, %q) = %v, want ErrInvalidArgument", tc.since, tc.until, tc.by, err)
		}
	}
	e := newEngine(openStore(t), engine.Config{})
	p, err := engine.ParseListUsage("2026-03-02", "2026-03-01", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ListUsage(t.Context(), p); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("ListUsage with since after until = %v, want ErrInvalidArgument", err)
	}
	p, err = engine.ParseListUsage("", "", " day , account")
	if err != nil || !reflect.DeepEqual(p.By, []engine.UsageField{engine.UsageDay, engine.UsageAccount}) {
		t.Errorf("ParseListUsage of by with spaces = %+v, %v; want day, account", p, err)
	}
}
