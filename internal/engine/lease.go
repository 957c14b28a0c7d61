package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Group commit (see group): the most one run serves. A run's weight is
// the tasks its calls claim, the heartbeats, or the results they record.
const (
	claimRunMax  = MaxClaimTasks
	renewRunMax  = 256
	resultRunMax = MaxBatchResults
)

// releaseUnreceived gives back, in one transaction, tasks just leased
// whose claim could not be answered (why), without holding the attempt
// against them; a task no longer held by that claim is left as it is.
func (e *Engine) releaseUnreceived(ctx context.Context, tasks []*domain.Task, why error) {
	if len(tasks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var released []*domain.Task
	err := e.tx(ctx, func(q store.Querier) (err error) {
		released, err = releaseLeases(ctx, q, tasks, e.now(), func(t *domain.Task) string {
			return fmt.Sprintf("released at once: the claim of attempt %d by worker %q was not answered (%v)", t.Attempt, t.LeaseOwner, why)
		})
		return err
	})
	if err != nil {
		e.log.WarnContext(ctx, "could not give back the tasks of a claim that was not answered; their leases will expire",
			"tasks", len(tasks), "error", err)
		return
	}
	e.held.refresh(released...) // still leased when a task's other attempt goes on
	e.released(released)
	e.log.InfoContext(ctx, "tasks of an unanswered claim given back", "tasks", len(released), "reason", why)
}

// releaseLeases gives back, in the transaction of q, each of tasks that
// still holds the lease it was read with (its LeaseOwner and Attempt),
// without holding the attempt against it, for the reason why says; it
// returns the tasks it released, as they are now. Call released after the
// commit.
func releaseLeases(ctx context.Context, q store.Querier, tasks []*domain.Task, now time.Time, why func(*domain.Task) string) ([]*domain.Task, error) {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	stored := make(map[string]*domain.Task, len(ids))
	if err := getTasks(ctx, q, ids, stored); err != nil {
		return nil, err
	}
	var released []*domain.Task
	for _, t := range tasks {
		s := stored[t.ID]
		if s == nil {
			continue
		}
		domain.Focus(s, t.LeaseOwner, t.Attempt, now)
		if domain.CheckLease(s, t.LeaseOwner, t.Attempt, now) != nil {
			continue
		}
		charge(q, s, now)
		chargeLapsed(q, s, now)
		domain.Release(s, why(t), now)
		released = append(released, s)
	}
	return released, q.TaskUpdateMany(ctx, released)
}

// released wakes the claimers of tasks just released and the waiters on
// their jobs, after the commit, so that they see the tasks. A released
// backup leaves its task leased to the other attempt: no claimer is woken
// for it.
func (e *Engine) released(tasks []*domain.Task) {
	if len(tasks) == 0 {
		return
	}
	byWorkload := map[string]int{}
	for _, t := range tasks {
		if t.State == domain.TaskPending {
			byWorkload[t.Workload]++
		}
	}
	for wl, n := range byWorkload {
		e.notifyWork(tasks[0].Kind, wl, n)
	}
	e.jobChanged(tasks...)
}

// getTasks reads the tasks of ids in one statement into m, by ID; an ID
// with no task leaves m as it was.
func getTasks(ctx context.Context, q store.Querier, ids []string, m map[string]*domain.Task) error {
	got, err := q.TaskGetMany(ctx, ids)
	if err != nil {
		return err
	}
	for _, t := range got {
		m[t.ID] = t
	}
	return nil
}
