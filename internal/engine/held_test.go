package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// countReads counts, in its transactions, the reads of many tasks at once,
// which a heartbeat or a result makes when the engine does not know its
// lease, and the writes of tasks.
type countReads struct {
	store.Store
	reads, writes atomic.Int64
}

func (s *countReads) InTx(ctx context.Context, fn func(q store.Querier) error) error {
	return s.Store.InTx(ctx, func(q store.Querier) error { return fn(countingQuerier{q, s}) })
}

type countingQuerier struct {
	store.Querier
	s *countReads
}

func (q countingQuerier) TaskGetMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	q.s.reads.Add(1)
	return q.Querier.TaskGetMany(ctx, ids)
}

func (q countingQuerier) TaskLockMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	q.s.reads.Add(1)
	return q.Querier.TaskLockMany(ctx, ids)
}

func (q countingQuerier) TaskUpdate(ctx context.Context, t *domain.Task) error {
	q.s.writes.Add(1)
	return q.Querier.TaskUpdate(ctx, t)
}

func (q countingQuerier) TaskUpdateMany(ctx context.Context, tasks []*domain.Task) error {
	if len(tasks) > 0 {
		q.s.writes.Add(1)
	}
	return q.Querier.TaskUpdateMany(ctx, tasks)
}

// counts are the reads and writes so far.
func (s *countReads) counts() (reads, writes int64) { return s.reads.Load(), s.writes.Load() }

// TestHeldLeases checks the leases an engine remembers: the heartbeats and
// results of leases it handed out are written without a read, and when
// another coordinator wrote the task in between (a heartbeat, a result, a
// cancel), the call is answered as if the engine had read it: what it
// remembers never decides an answer the database does not give.
func TestHeldLeases(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		counted := &countReads{Store: s}
		a := newEngine(counted, engine.Config{Now: c.Now, Jitter: func() float64 { return 0 }}) // hands out the leases
		b := newEngine(s, engine.Config{Now: c.Now, Jitter: func() float64 { return 0 }})       // another coordinator
		v, _, err := a.CreateJob(ctx, spec(4), "")
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := a.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 4})
		if err != nil || len(tasks) != 4 {
			t.Fatalf("claim: %d tasks, %v; want 4", len(tasks), err)
		}
		stored := func(id string) *domain.Task {
			t.Helper()
			got, err := s.TaskGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		result := func(id, output string) engine.CompleteTaskParams {
			return engine.CompleteTaskParams{TaskID: id, WorkerID: "w", Attempt: 1, Output: []byte(output)}
		}
		const out = "id,score\na,1\n"

		// A heartbeat and a result through the engine that leased: no read.
		c.Advance(10 * time.Second)
		expires, err := a.RenewLease(ctx, tasks[0].ID, "w", 1)
		if err != nil || !expires.Equal(c.Now().Add(60*time.Second)) {
			t.Fatalf("heartbeat = %v, %v; want the lease renewed to %v", expires, err, c.Now().Add(60*time.Second))
		}
		if got, err := a.CompleteTask(ctx, result(tasks[0].ID, out)); err != nil || got.State != domain.TaskCompleted {
			t.Fatalf("result = %+v, %v; want completed", got, err)
		}
		if n := counted.reads.Load(); n != 0 {
			t.Errorf("a heartbeat and a result of a lease handed out here read tasks %d times; want none", n)
		}
		if got := stored(tasks[0].ID); got.State != domain.TaskCompleted || string(got.Result) != out {
			t.Errorf("stored: %s with %q; want completed with %q", got.State, got.Result, out)
		}

		// A heartbeat through the other coordinator, then the result here:
		// the write from the stale snapshot fails, and the rerun reads.
		if _, err := b.RenewLease(ctx, tasks[1].ID, "w", 1); err != nil {
			t.Fatal(err)
		}
		reads, writes := counted.counts()
		if got, err := a.CompleteTask(ctx, result(tasks[1].ID, out)); err != nil || got.State != domain.TaskCompleted {
			t.Fatalf("result after a heartbeat elsewhere = %+v, %v; want completed", got, err)
		}
		if r, w := counted.counts(); r-reads != 1 || w-writes != 2 {
			t.Errorf("the result after a heartbeat elsewhere read %d times and wrote %d; want the stale write, one read and its write (1, 2)", r-reads, w-writes)
		}
		if got := stored(tasks[1].ID); got.State != domain.TaskCompleted {
			t.Errorf("stored after a heartbeat elsewhere: %s; want completed", got.State)
		}

		// The result recorded through the other coordinator, then sent here
		// again (a replay) and with another output (a conflict).
		if _, err := b.CompleteTask(ctx, result(tasks[2].ID, out)); err != nil {
			t.Fatal(err)
		}
		before := stored(tasks[2].ID)
		if got, err := a.CompleteTask(ctx, result(tasks[2].ID, out)); err != nil || got.State != domain.TaskCompleted {
			t.Fatalf("the replay of a result recorded elsewhere = %+v, %v; want its task, completed", got, err)
		}
		if after := stored(tasks[2].ID); after.Version != before.Version {
			t.Errorf("the replay wrote the task: version %d → %d", before.Version, after.Version)
		}
		// The rerun let go of the stale snapshot: what comes next for
		// this lease reads at once, without a write that fails first.
		reads, writes = counted.counts()
		if _, err := a.CompleteTask(ctx, result(tasks[2].ID, "id,score\nb,2\n")); !errors.Is(err, domain.ErrConflict) {
			t.Errorf("another output for a task completed elsewhere: %v; want ErrConflict", err)
		}
		if after := stored(tasks[2].ID); after.Version != before.Version || string(after.Result) != out {
			t.Errorf("the refused output changed the task: version %d → %d, result %q", before.Version, after.Version, after.Result)
		}
		if r, w := counted.counts(); r-reads != 1 || w-writes != 0 {
			t.Errorf("a result after a rerun read %d times and wrote %d; want 1, 0 (the stale snapshot let go)", r-reads, w-writes)
		}

		// The job cancelled through the other coordinator: the lease this
		// engine remembers as live is gone.
		if _, err := b.CancelJob(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := a.RenewLease(ctx, tasks[3].ID, "w", 1); !errors.Is(err, domain.ErrCancelled) {
			t.Errorf("a heartbeat here after a cancel elsewhere: %v; want ErrCancelled", err)
		}
		if _, err := a.CompleteTask(ctx, result(tasks[3].ID, out)); !errors.Is(err, domain.ErrCancelled) {
			t.Errorf("a result here after a cancel elsewhere: %v; want ErrCancelled", err)
		}
		if got := stored(tasks[3].ID); got.State != domain.TaskCancelled || got.Result != nil {
			t.Errorf("stored after the cancel: %s with %q; want cancelled, no result", got.State, got.Result)
		}
	})
}

// TestHeldVotes checks the chunks being voted on that an engine
// remembers: a ballot's result through the engine that wrote its chunk
// last locks the chunk without reading it, and after another coordinator
// wrote the chunk (a heartbeat of its other ballot) the result reads it,
// so that the tally sees what the other wrote.
func TestHeldVotes(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		counted := &countReads{Store: s}
		a := newEngine(counted, engine.Config{})
		b := newEngine(s, engine.Config{})
		j := anyJobOf(t, a, 2, 2, 3)
		prs := []domain.Principal{{Account: "ada", Key: "k"}, {Account: "bob", Key: "k"}}
		ada, bob := key(ctx, "ada"), key(ctx, "bob")
		chunkDone := func(id string) {
			t.Helper()
			got, err := s.TaskGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != domain.TaskCompleted || string(got.Result) != "id,score\nx,1\n" {
				t.Errorf("chunk %s: %s with %q; want completed with the agreed result", id, got.State, got.Result)
			}
		}
		for i := range 2 {
			got, err := a.ClaimOpenTogether(prs, []string{"a1", "b1"})
			if err != nil {
				t.Fatal(err)
			}
			r1, r2 := fmt.Sprintf("%s-%d.r1", j.ID, i), fmt.Sprintf("%s-%d.r2", j.ID, i)
			if want := [][]string{{r1}, {r2}}; !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("ada and bob claim together %v; want %v", got, want)
			}
			reads := counted.reads.Load()
			if i == 1 { // bob's heartbeat through the other coordinator
				if _, err := b.RenewLease(bob, r2, "b1", 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := complete(ada, a, r1, "a1", "x"); err != nil {
				t.Fatal(err)
			}
			if err := complete(bob, a, r2, "b1", "x"); err != nil {
				t.Fatal(err)
			}
			if n, want := counted.reads.Load()-reads, int64(i); n != want {
				t.Errorf("chunk %d: its two results read it %d times; want %d", i, n, want)
			}
			chunkDone(fmt.Sprintf("%s-%d", j.ID, i))
		}
	})
}

// TestHeldTreeLeases checks the same for tree tasks (Worker.Keepalive and
// Done): a result through the engine that leased is written without a
// read, flows to its downstream, and one after a heartbeat through another
// coordinator is still recorded.
func TestHeldTreeLeases(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		counted := &countReads{Store: s}
		a := newEngine(counted, engine.Config{Shard: "s0"})
		b := newEngine(s, engine.Config{Shard: "s0"})
		ids, root, err := a.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
			{ID: "s0:root", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:x"}, {Ref: "s0:y"}}},
			{ID: "s0:x", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("1")}}},
			{ID: "s0:y", Workload: "num", Args: []domain.TreeArg{{Value: json.RawMessage("2")}}},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := a.PollTree(ctx, "w", []string{"num"}, 0)
		if err != nil || x == nil {
			t.Fatalf("PollTree = %+v, %v", x, err)
		}
		y, err := a.PollTree(ctx, "w", []string{"num"}, 0)
		if err != nil || y == nil {
			t.Fatalf("PollTree = %+v, %v", y, err)
		}
		before := counted.reads.Load()
		if err := a.CompleteTree(ctx, x.ID, "w", 1, json.RawMessage("10")); err != nil {
			t.Fatal(err)
		}
		if n := counted.reads.Load() - before; n != 0 {
			t.Errorf("the result of a tree lease handed out here read tasks %d times; want none", n)
		}
		if _, err := b.RenewLease(ctx, y.ID, "w", 1); err != nil {
			t.Fatal(err)
		}
		if err := a.CompleteTree(ctx, y.ID, "w", 1, json.RawMessage("20")); err != nil {
			t.Fatalf("a tree result after a heartbeat elsewhere: %v", err)
		}
		sum, err := a.PollTree(ctx, "w", []string{"sum"}, 0)
		if err != nil || sum == nil || sum.ID != root || len(sum.Args) != 2 || string(sum.Args[0]) != "10" || string(sum.Args[1]) != "20" {
			t.Fatalf("the root after both results: %+v, %v; want %s with arguments 10 and 20", sum, err, ids["s0:root"])
		}
		// A result recorded through the other coordinator, then another
		// output here: the answer is the task's own conflict, as a read
		// gives, not its downstream's.
		ids2, _, err := a.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
			{ID: "s0:root2", Workload: "sum", Args: []domain.TreeArg{{Ref: "s0:z"}}},
			{ID: "s0:z", Workload: "one", Args: []domain.TreeArg{{Value: json.RawMessage("3")}}},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		z, err := a.PollTree(ctx, "w", []string{"one"}, 0)
		if err != nil || z == nil || z.ID != ids2["s0:z"] {
			t.Fatalf("PollTree = %+v, %v", z, err)
		}
		if err := b.CompleteTree(ctx, z.ID, "w", 1, json.RawMessage("30")); err != nil {
			t.Fatal(err)
		}
		if err := a.CompleteTree(ctx, z.ID, "w", 1, json.RawMessage("31")); !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "already completed with a different result") {
			t.Errorf("another output here for a tree task completed elsewhere: %v; want the task's own conflict", err)
		}
	})
}

// TestHeldRenewalsElsewhere checks that a heartbeat does not make an engine
// remember a lease another handed out: with requests spread over two
// coordinators, the next heartbeat would find it stale.
func TestHeldRenewalsElsewhere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	counted := &countReads{Store: s}
	a := newEngine(counted, engine.Config{})
	b := newEngine(s, engine.Config{})
	if _, _, err := b.CreateJob(ctx, spec(1), ""); err != nil {
		t.Fatal(err)
	}
	tasks, err := b.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %d tasks, %v", len(tasks), err)
	}
	for i := range 2 {
		if _, err := a.RenewLease(ctx, tasks[0].ID, "w", 1); err != nil {
			t.Fatal(err)
		}
		if r, w := counted.counts(); r != int64(i+1) || w != int64(i+1) {
			t.Errorf("after heartbeat %d here of a lease handed out elsewhere: %d reads, %d writes; want %d each", i+1, r, w, i+1)
		}
	}
}
