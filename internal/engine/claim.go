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

// Claim bounds.
const (
	MaxClaimTasks   = 1000
	MaxClaimWait    = 60 * time.Second
	MaxBatchResults = 1000
)

// ClaimTasksParams says who claims what.
type ClaimTasksParams struct {
	WorkerID  string
	Workloads []string      // empty for any
	Max       int           // 1-1000; 0 means 1
	Wait      time.Duration // hold the call until a task is ready, at most 60s
	// Versions says what the worker runs for some of Workloads: the
	// workload's version, which the chunk cache keys outputs by.
	Versions map[string]string

	kind domain.TaskKind // chunk tasks unless set (PollTree sets tree)
}

// ClaimTasks leases up to p.Max runnable chunk tasks to p.WorkerID, in claim
// order: fair share between accounts, then priority, the job with the
// fewest leased tasks, oldest job, chunk index (Config.Scheduling fair);
// or priority, oldest job, chunk index (fifo). With p.Wait it holds
// until a task is ready or the wait is over; none is an empty slice.
func (e *Engine) ClaimTasks(ctx context.Context, p ClaimTasksParams) ([]*TaskView, error) {
	if !domain.ValidWorkerID(p.WorkerID) {
		return nil, domain.Invalidf("worker_id %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", p.WorkerID)
	}
	for _, w := range p.Workloads {
		if !domain.ValidWorkload(w) {
			return nil, domain.Invalidf("workload %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", w)
		}
	}
	if p.Max == 0 {
		p.Max = 1
	}
	if p.Max < 1 || p.Max > MaxClaimTasks {
		return nil, domain.Invalidf("max_tasks is %d; it must be between 1 and %d", p.Max, MaxClaimTasks)
	}
	if p.Wait < 0 || p.Wait > MaxClaimWait {
		return nil, domain.Invalidf("wait_seconds is %v; it must be between 0 and 60", p.Wait.Seconds())
	}
	// The same workload twice would count twice against Max in the store.
	p.Workloads = slices.Compact(slices.Sorted(slices.Values(p.Workloads)))
	for name, v := range p.Versions {
		if _, found := slices.BinarySearch(p.Workloads, name); !found {
			return nil, domain.Invalidf("workload_versions names %q, which workloads does not", name)
		}
		if !domain.ValidVersion(v) {
			return nil, domain.Invalidf("the version %q of workload %s must be 1-128 characters of A-Z a-z 0-9 . _ : + -", v, name)
		}
	}
	pr := domain.PrincipalOf(ctx)
	p.WorkerID = pr.LeaseOwner(p.WorkerID)
	e.seen(ctx, p.WorkerID, workerCall{announced: cmp.Or(p.kind, domain.KindChunk) == domain.KindChunk,
		workloads: p.Workloads, versions: p.Versions})
	// Untrusted workers claim what is open to them (claimOpen). Trusted
	// ones claim as always and, finding nothing, the replicas of chunks
	// being voted on, whose outputs they settle alone.
	leased := func(ctx context.Context, p ClaimTasksParams) ([]*TaskView, error) {
		if !pr.Trusted {
			return e.claimOpen(ctx, p, pr)
		}
		tasks, err := e.claimOnce(ctx, p)
		if err != nil || len(tasks) > 0 {
			return tasks, err
		}
		return e.claimOpen(ctx, p, pr)
	}
	// Tasks the chunk cache completes are not handed out; a claim they
	// all were claims again.
	claim := func(ctx context.Context, p ClaimTasksParams) ([]*TaskView, error) {
		for {
			tasks, err := leased(ctx, p)
			if err == nil && len(tasks) == 0 && pr.Trusted && cmp.Or(p.kind, domain.KindChunk) == domain.KindChunk {
				tasks, err = e.claimBackup(ctx, p)
			}
			if err != nil || len(tasks) == 0 {
				return tasks, err
			}
			if tasks = e.serveFromCache(ctx, p, tasks); len(tasks) > 0 {
				return tasks, nil
			}
		}
	}
	if p.Wait == 0 {
		return claim(ctx, p)
	}
	// A claim that may wait joins the line before its first claim, so that
	// no wake-up is missed between a claim and the wait. With the line
	// full it may still take what is there, but not wait.
	w, err := e.claimers.join(cmp.Or(p.kind, domain.KindChunk), p.Workloads, p.Max)
	if err != nil {
		tasks, cerr := claim(ctx, p)
		if cerr != nil || len(tasks) > 0 {
			return tasks, cerr
		}
		return nil, err
	}
	defer e.claimers.leave(w)
	tasks, err := claim(ctx, p)
	if err != nil || len(tasks) > 0 {
		return tasks, err
	}
	deadline := time.Now().Add(p.Wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(left, e.cfg.PollInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-w.woken:
		case <-t.C:
		}
		t.Stop()
		tasks, err := claim(ctx, p)
		if err != nil || len(tasks) > 0 {
			return tasks, err
		}
	}
}

// claimCall is one claim of up to n tasks waiting to share a claim
// statement with others of the same kind and workloads.
type claimCall struct {
	worker    string
	n         int
	kind      domain.TaskKind
	workloads []string
}

// claimAnswer is what one claimCall got: up to n tasks, in claim order.
type claimAnswer struct {
	tasks []*domain.Task
	err   error
}

func (e *Engine) claimOnce(ctx context.Context, p ClaimTasksParams) ([]*TaskView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // gone already: claim nothing to give back
	}
	e.sweepBeforeClaim(ctx)
	kind := cmp.Or(p.kind, domain.KindChunk)
	// Claims that arrive together share one statement.
	key := string(kind) + "\x00" + strings.Join(p.Workloads, "\x00")
	a, err := e.claims.do(ctx, key, claimCall{worker: p.WorkerID, n: p.Max, kind: kind, workloads: p.Workloads}, p.Max)
	if err == nil {
		err = a.err
	}
	if err != nil {
		return nil, err
	}
	// No WaitJob is woken: a lease does not move a job's marker but for
	// its first, which makes the job running, and the waiters' own
	// re-reads see that well within the second they hold such a change.
	views, err := e.answerClaim(ctx, a.tasks)
	if err != nil {
		return nil, err
	}
	for _, t := range a.tasks {
		e.log.DebugContext(ctx, "task leased", "task_id", t.ID, "job_id", t.JobID, "worker_id", p.WorkerID, "attempt", t.Attempt)
	}
	return views, nil
}

// answerClaim returns the views of tasks just leased to a claimer. When
// that fails, or the claimer went away meanwhile (a worker shutting down,
// a closed connection) and so never receives them, the tasks go back at
// once rather than wait out a lease that nobody holds.
func (e *Engine) answerClaim(ctx context.Context, tasks []*domain.Task) ([]*TaskView, error) {
	views, err := e.claimViews(ctx, tasks)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		e.releaseUnreceived(ctx, tasks, err)
		return nil, err
	}
	return views, nil
}

// claimViews are the answers to a claim of tasks: each with its job's
// settings, a signed input when presigning, and a tree task's arguments.
func (e *Engine) claimViews(ctx context.Context, tasks []*domain.Task) ([]*TaskView, error) {
	views := make([]*TaskView, len(tasks))
	for i, t := range tasks {
		v, err := e.taskView(ctx, t)
		if err != nil {
			return nil, err
		}
		if t.Kind == domain.KindTree {
			args, err := e.store.TaskArgList(ctx, t.ID)
			if err != nil {
				return nil, mapStoreErr(fmt.Errorf("arguments of task %s: %w", t.ID, err))
			}
			for _, a := range args {
				v.Args = append(v.Args, a.Value)
			}
		}
		e.presign(ctx, v)
		views[i] = v
	}
	return views, nil
}

// claim leases up to len(owners) tasks of kind and workloads in one
// statement (with fair scheduling, one store call), the i-th in claim
// order to owners[i], and returns them by priority, job and chunk index.
func (e *Engine) claim(ctx context.Context, kind domain.TaskKind, workloads, owners []string) ([]*domain.Task, error) {
	start := time.Now()
	var tasks []*domain.Task
	err := e.retry(ctx, func() error {
		var err error
		tasks, err = e.store.TaskClaim(ctx, &store.TaskClaimParams{
			Owners: owners, Kinds: []domain.TaskKind{kind}, Workloads: workloads, Now: e.now(),
			Fair: e.cfg.Scheduling != SchedulingFIFO, WorkEpoch: e.workEpoch.Load(),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	e.held.keep(e.now(), tasks...)
	e.cfg.Observer.Claimed(kind, len(tasks), time.Since(start))
	slices.SortFunc(tasks, claimOrder)
	return tasks, nil
}

// claimRun serves claims together: one claim statement names each caller
// as the owner of as many tasks as it asked for, in the order they came.
func (e *Engine) claimRun(ctx context.Context, calls []claimCall) []claimAnswer {
	out := make([]claimAnswer, len(calls))
	var owners []string
	for _, c := range calls {
		for range c.n {
			owners = append(owners, c.worker)
		}
	}
	tasks, err := e.claim(ctx, calls[0].kind, calls[0].workloads, owners)
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	// Each task goes to a caller it was leased to, in claim order, the
	// callers of one worker ID in turn (they are alike).
	waiting := map[string][]int{} // worker → its calls with room left, in order
	for i, c := range calls {
		waiting[c.worker] = append(waiting[c.worker], i)
	}
	for _, t := range tasks {
		q := waiting[t.LeaseOwner]
		if len(q) == 0 {
			continue // cannot happen: the statement leased it to one of them
		}
		i := q[0]
		out[i].tasks = append(out[i].tasks, t)
		if len(out[i].tasks) == calls[i].n {
			waiting[t.LeaseOwner] = q[1:]
		}
	}
	return out
}

func claimOrder(a, b *domain.Task) int {
	switch {
	case a.Priority != b.Priority:
		return b.Priority - a.Priority
	case !a.JobCreatedAt.Equal(b.JobCreatedAt):
		return a.JobCreatedAt.Compare(b.JobCreatedAt)
	case a.JobID != b.JobID:
		if a.JobID < b.JobID {
			return -1
		}
		return 1
	}
	return a.ChunkIndex - b.ChunkIndex
}
