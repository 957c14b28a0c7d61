package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// FailTaskParams is a worker's report that its attempt failed.
type FailTaskParams struct {
	TaskID    string
	WorkerID  string
	Attempt   int
	Error     string
	Retryable bool
	// Release gives the task back at once, without backoff and without
	// holding the attempt against it: for workers shutting down.
	Release bool
}

// MaxErrorBytes bounds a recorded error message.
const MaxErrorBytes = 8 << 10

// FailTask ends the live lease (worker, attempt) with an error. A retryable
// failure with attempts left puts the task back to pending after a backoff;
// otherwise the task fails for good and fails its job.
func (e *Engine) FailTask(ctx context.Context, p FailTaskParams) (*TaskView, error) {
	if err := domain.CheckLeaseRequest(p.WorkerID, p.Attempt); err != nil {
		return nil, err
	}
	p.WorkerID = domain.PrincipalOf(ctx).LeaseOwner(p.WorkerID)
	if len(p.Error) > MaxErrorBytes {
		p.Error = p.Error[:MaxErrorBytes]
	}
	p.Error = strings.ToValidUTF8(strings.ReplaceAll(p.Error, "\x00", ""), "\uFFFD")
	var task *domain.Task
	err := e.tx(ctx, func(q store.Querier) error {
		t, err := q.TaskGet(ctx, p.TaskID)
		if err != nil {
			return notFound(err, "task %q", p.TaskID)
		}
		now := e.now()
		domain.Focus(t, p.WorkerID, p.Attempt, now)
		if err := domain.CheckLease(t, p.WorkerID, p.Attempt, now); err != nil {
			return err
		}
		if _, err := e.lockVotes(ctx, q, t); err != nil {
			return err
		}
		task = t
		charge(q, t, now)
		if p.Retryable || p.Release {
			chargeLapsed(q, t, now) // a live other attempt goes on
		} else {
			chargeSecond(q, t, now) // a failure for good ends both
		}
		if p.Release {
			domain.Release(t, p.Error, now)
			return q.TaskUpdate(ctx, t)
		}
		return e.endAttempt(ctx, q, t, p.Error, p.Retryable, now)
	})
	if err != nil {
		return nil, fmt.Errorf("record failure: %w", err)
	}
	e.held.refresh(task) // still leased when the task's other attempt goes on
	if task.State == domain.TaskPending && !task.RunAfter.After(e.now()) {
		e.notifyWork(task.Kind, task.Workload, 1) // after the commit, so that woken claimers see the task
	}
	if task.Kind == domain.KindReplica {
		e.notifyWork(domain.KindChunk, task.Workload, domain.MaxQuorum) // the replicas its vote may have added
	}
	if !p.Release {
		e.cfg.Observer.Failed(task.Kind, task.State == domain.TaskFailed)
	}
	e.jobChanged(task)
	e.log.InfoContext(ctx, "task attempt failed", "task_id", task.ID, "job_id", task.JobID,
		"worker_id", p.WorkerID, "attempt", p.Attempt, "state", task.State, "error", p.Error)
	return e.taskView(ctx, task)
}

// endAttempt ends t's current attempt with reason inside a transaction: back
// to pending while it may retry, else failed together with its job.
func (e *Engine) endAttempt(ctx context.Context, q store.Querier, t *domain.Task, reason string, retryable bool, now time.Time) error {
	wait := domain.Backoff(t.Attempt, e.cfg.Jitter())
	if !retryable {
		wait = 0
	}
	final := domain.Retry(t, reason, retryable, wait, now)
	if err := q.TaskUpdate(ctx, t); err != nil {
		return err
	}
	if !final {
		return nil
	}
	return e.failedForGood(ctx, q, t, now)
}

// failedForGood acts, in the transaction of q, on t having just failed
// for good and been written: a replica's chunk tallies its vote
// (settleVote), any other task fails its job (failJob).
func (e *Engine) failedForGood(ctx context.Context, q store.Querier, t *domain.Task, now time.Time) error {
	if t.Kind == domain.KindReplica {
		return e.settleVote(ctx, q, t, false, now)
	}
	return e.failJob(ctx, q, t, now)
}

// failJob fails the job of t, which failed for good, then the path to the
// root and the rest of the tree (failPath); a tree task has no job.
func (e *Engine) failJob(ctx context.Context, q store.Querier, t *domain.Task, now time.Time) error {
	if t.Kind != domain.KindTree && t.JobID != "" { // a tree's ID is no job's
		j, err := q.JobGet(ctx, t.JobID)
		if err != nil {
			return err
		}
		if j.Status.Final() {
			return nil // cancelled or failed already: its tasks are final
		}
		what := "task " + t.ID
		if t.Kind == domain.KindChunk {
			what = fmt.Sprintf("task %s (chunk %d)", t.ID, t.ChunkIndex)
		}
		reason := fmt.Sprintf("%s failed after %d attempt(s): %s", what, t.Attempt, t.Error)
		if t.Kind == domain.KindStitch { // its attempts are coordinators' leases, not the job's
			reason = fmt.Sprintf("stitch task %s failed: %s", t.ID, t.Error)
		}
		domain.FinishJob(j, domain.JobFailed, reason, now)
		if err := q.JobUpdate(ctx, j); err != nil {
			return err
		}
	}
	return e.failPath(ctx, q, t, "", nil, now)
}
