package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// leaseBundle is an engine on a SQLite file with a clock that stands
// still, and a job of one chunk whose task w1 has leased (attempt 1).
type leaseBundle struct {
	e     *engine.Engine
	s     store.Store
	clock *enginetest.Clock
	job   string
	task  *engine.TaskView
}

func newLeaseBundle(t *testing.T, maxAttempts int) *leaseBundle {
	t.Helper()
	s := openStore(t)
	c := enginetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEngine(s, engine.Config{Now: c.Now, Jitter: func() float64 { return 0 }})
	sp := spec(1)
	sp.MaxAttempts = maxAttempts
	v, _, err := e.CreateJob(t.Context(), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	b := &leaseBundle{e: e, s: s, clock: c, job: v.ID}
	b.task = b.claim(t, "w1", 1)
	return b
}

// claim leases the job's chunk to worker and checks that it is attempt.
func (b *leaseBundle) claim(t *testing.T, worker string, attempt int) *engine.TaskView {
	t.Helper()
	tasks, err := b.e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: worker})
	if err != nil || len(tasks) != 1 || tasks[0].Attempt != attempt || tasks[0].LeaseOwner != worker {
		t.Fatalf("claim by %s: %+v, %v; want attempt %d", worker, tasks, err, attempt)
	}
	return tasks[0]
}

// stored reads the task as the database has it.
func (b *leaseBundle) stored(t *testing.T) *domain.Task {
	t.Helper()
	got, err := b.s.TaskGet(t.Context(), b.task.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (b *leaseBundle) result(worker string, attempt int, output string) engine.CompleteTaskParams {
	return engine.CompleteTaskParams{TaskID: b.task.ID, WorkerID: worker, Attempt: attempt, Output: []byte(output)}
}

// writes tries every worker write to the task as (worker, attempt) and
// returns their errors by name.
func (b *leaseBundle) writes(t *testing.T, worker string, attempt int) map[string]error {
	t.Helper()
	ctx := t.Context()
	_, renew := b.e.RenewLease(ctx, b.task.ID, worker, attempt)
	_, complete := b.e.CompleteTask(ctx, b.result(worker, attempt, "id,score\na,1\n"))
	_, fail := b.e.FailTask(ctx, engine.FailTaskParams{TaskID: b.task.ID, WorkerID: worker, Attempt: attempt, Error: "boom", Retryable: true})
	_, release := b.e.FailTask(ctx, engine.FailTaskParams{TaskID: b.task.ID, WorkerID: worker, Attempt: attempt, Release: true})
	return map[string]error{"RenewLease": renew, "CompleteTask": complete, "FailTask": fail, "FailTask(release)": release}
}

// checkRefused checks that every write of (worker, attempt) was refused
// with want and that the task did not change.
func (b *leaseBundle) checkRefused(t *testing.T, what, worker string, attempt int, want error) {
	t.Helper()
	before := b.stored(t)
	for name, err := range b.writes(t, worker, attempt) {
		if !errors.Is(err, want) {
			t.Errorf("%s: %s by %s attempt %d = %v, want %v", what, name, worker, attempt, err, want)
		}
	}
	if after := b.stored(t); after.Version != before.Version || after.State != before.State {
		t.Errorf("%s: refused writes changed the task: %s at version %d, was %s at %d",
			what, after.State, after.Version, before.State, before.Version)
	}
}

// TestLeaseFencing checks that only the live lease's (worker, attempt) may
// write to a task: another worker, or the right worker naming another
// attempt, is refused with ErrLeaseLost and changes nothing; once the job
// is over, every write is ErrCancelled.
func TestLeaseFencing(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 3)
	b.checkRefused(t, "another worker", "w2", 1, domain.ErrLeaseLost)
	b.checkRefused(t, "another attempt", "w1", 2, domain.ErrLeaseLost)

	b.clock.Advance(30 * time.Second)
	expires, err := b.e.RenewLease(t.Context(), b.task.ID, "w1", 1)
	if want := b.clock.Now().Add(60 * time.Second); err != nil || !expires.Equal(want) {
		t.Fatalf("RenewLease by the holder = %v, %v; want the lease renewed to %v", expires, err, want)
	}
	if got := b.stored(t); !got.LeaseExpiresAt.Equal(expires) {
		t.Fatalf("stored lease expiry %v, want %v", got.LeaseExpiresAt, expires)
	}

	if _, err := b.e.CancelJob(t.Context(), b.job); err != nil {
		t.Fatal(err)
	}
	b.checkRefused(t, "the holder after its job was cancelled", "w1", 1, domain.ErrCancelled)
}

// TestLeaseStaleAttempt checks that a lease is lost once it expires, even
// before the reaper notices, and that the attempt it belonged to stays
// fenced off after the next claim: its heartbeat, result and failure are
// ErrLeaseLost while the new attempt's are taken.
func TestLeaseStaleAttempt(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 3)
	b.clock.Advance(60 * time.Second) // the lease's expiry: lost from here
	b.checkRefused(t, "an expired lease not yet reaped", "w1", 1, domain.ErrLeaseLost)

	if n, err := b.e.ExpireLeases(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireLeases = %d, %v; want 1", n, err)
	}
	b.claim(t, "w2", 2)
	b.checkRefused(t, "the previous attempt", "w1", 1, domain.ErrLeaseLost)
	b.checkRefused(t, "the previous attempt's number on the new holder", "w2", 1, domain.ErrLeaseLost)
	if got, err := b.e.CompleteTask(t.Context(), b.result("w2", 2, "id,score\na,1\n")); err != nil || got.State != domain.TaskCompleted {
		t.Fatalf("the new attempt's result = %v, %v; want completed", got, err)
	}
}
