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

// TestReleaseOnLastAttemptIsSaved releases a task on its last attempt: the
// bump of max_attempts is in the database, so the next attempt's failure
// is retried like any other and the task does not fail early.
func TestReleaseOnLastAttemptIsSaved(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	e := newEngine(s, engine.Config{Jitter: func() float64 { return 0 }})
	sp := spec(1)
	sp.MaxAttempts = 1
	v, _, err := e.CreateJob(t.Context(), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v, %v", tasks, err)
	}
	id := tasks[0].ID
	if _, err := e.FailTask(t.Context(), engine.FailTaskParams{TaskID: id, WorkerID: "w", Attempt: 1, Error: "worker stopping", Release: true}); err != nil {
		t.Fatal(err)
	}
	stored, err := s.TaskGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != domain.TaskPending || stored.Attempt != 1 || stored.MaxAttempts != 2 {
		t.Fatalf("stored after the release: state %s, attempt %d, max_attempts %d; want pending, 1, 2",
			stored.State, stored.Attempt, stored.MaxAttempts)
	}
	tasks, err = e.ClaimTasks(t.Context(), engine.ClaimTasksParams{WorkerID: "w2"})
	if err != nil || len(tasks) != 1 || tasks[0].Attempt != 2 || tasks[0].MaxAttempts != 2 {
		t.Fatalf("claim after the release: %+v, %v; want attempt 2 of 2", tasks, err)
	}
	// The attempt the release gave back is the last: its failure is final.
	got, err := e.FailTask(t.Context(), engine.FailTaskParams{TaskID: id, WorkerID: "w2", Attempt: 2, Error: "boom", Retryable: true})
	if err != nil || got.State != domain.TaskFailed {
		t.Fatalf("failure of attempt 2 = %v, %v; want failed", got, err)
	}
	job, err := e.GetJob(t.Context(), v.ID)
	if err != nil || job.Status != domain.JobFailed {
		t.Fatalf("job = %+v, %v; want failed", job, err)
	}
}

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

// TestLeaseResultReplay checks that the holder's result completes the task
// once: the same result again changes nothing and succeeds, a different
// one is ErrConflict (409 on every transport), and the same result from
// anyone else is ErrLeaseLost.
func TestLeaseResultReplay(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 3)
	ctx := t.Context()
	first := b.result("w1", 1, "id,score\na,1\n")
	got, err := b.e.CompleteTask(ctx, first)
	if err != nil || got.State != domain.TaskCompleted {
		t.Fatalf("CompleteTask = %v, %v; want completed", got, err)
	}
	done := b.stored(t)

	b.clock.Advance(time.Minute) // past the lease: a replay needs none
	again, err := b.e.CompleteTask(ctx, first)
	if err != nil || again.State != domain.TaskCompleted {
		t.Fatalf("replayed CompleteTask = %v, %v; want the completed task", again, err)
	}
	if after := b.stored(t); after.Version != done.Version || !after.FinishedAt.Equal(done.FinishedAt) {
		t.Fatalf("the replay wrote: version %d, finished %v; was %d, %v", after.Version, after.FinishedAt, done.Version, done.FinishedAt)
	}
	for _, c := range []struct {
		what string
		p    engine.CompleteTaskParams
		want error
	}{
		{"a different result", b.result("w1", 1, "id,score\nb,2\n"), domain.ErrConflict},
		{"the same result from another worker", b.result("w2", 1, "id,score\na,1\n"), domain.ErrLeaseLost},
		{"the same result from another attempt", b.result("w1", 2, "id,score\na,1\n"), domain.ErrLeaseLost},
	} {
		if _, err := b.e.CompleteTask(ctx, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: CompleteTask = %v, want %v", c.what, err, c.want)
		}
	}
	if after := b.stored(t); after.Version != done.Version || string(after.Result) != string(first.Output) {
		t.Fatalf("refused results changed the task: version %d, result %q", after.Version, after.Result)
	}
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

// TestLeaseRelease checks that a worker releasing its lease gives the task
// back at once, without backoff and without spending the attempt, and
// that the released attempt is fenced off like any other lost lease.
func TestLeaseRelease(t *testing.T) {
	t.Parallel()
	b := newLeaseBundle(t, 3)
	got, err := b.e.FailTask(t.Context(), engine.FailTaskParams{TaskID: b.task.ID, WorkerID: "w1", Attempt: 1,
		Error: "worker stopping", Release: true})
	if err != nil || got.State != domain.TaskPending || got.RunAfter.After(b.clock.Now()) || got.MaxAttempts != 3 {
		t.Fatalf("release = %+v, %v; want pending at once with max_attempts 3", got, err)
	}
	if s := b.stored(t); s.LeaseExpiresAt != (time.Time{}) || s.Error != "worker stopping" {
		t.Fatalf("stored after the release: lease expiry %v, error %q; want none, the reason", s.LeaseExpiresAt, s.Error)
	}
	b.checkRefused(t, "the released attempt", "w1", 1, domain.ErrLeaseLost)
	b.claim(t, "w2", 2) // at once: no backoff passes on the clock
}
