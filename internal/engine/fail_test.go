package engine_test

import (
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
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
