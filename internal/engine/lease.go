package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
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

// Group commit (see group): the most one run serves. A run's weight is
// the tasks its calls claim, the heartbeats, or the results they record.
const (
	claimRunMax  = MaxClaimTasks
	renewRunMax  = 256
	resultRunMax = MaxBatchResults
)

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
	views, err := e.claimViews(ctx, a.tasks)
	if err == nil {
		// A caller that went away while its claim ran (a worker
		// shutting down, a closed connection) never receives the tasks.
		err = ctx.Err()
	}
	if err != nil {
		// They go back at once rather than wait out a lease that nobody
		// holds.
		e.releaseUnreceived(ctx, a.tasks, err)
		return nil, err
	}
	for _, t := range a.tasks {
		e.log.DebugContext(ctx, "task leased", "task_id", t.ID, "job_id", t.JobID, "worker_id", p.WorkerID, "attempt", t.Attempt)
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
// their jobs, after the commit, so that they see the tasks.
func (e *Engine) released(tasks []*domain.Task) {
	if len(tasks) == 0 {
		return
	}
	byWorkload := map[string]int{}
	for _, t := range tasks {
		byWorkload[t.Workload]++
	}
	for wl, n := range byWorkload {
		e.notifyWork(tasks[0].Kind, wl, n)
	}
	e.jobChanged(tasks...)
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

// RenewLease renews the live lease held by (worker, attempt) and returns its
// new expiry. Heartbeats that arrive together are written together.
func (e *Engine) RenewLease(ctx context.Context, taskID, worker string, attempt int) (time.Time, error) {
	if err := domain.CheckLeaseRequest(worker, attempt); err != nil {
		return time.Time{}, err
	}
	worker = domain.PrincipalOf(ctx).LeaseOwner(worker)
	a, err := e.renews.do(ctx, renewCall{taskID: taskID, worker: worker, attempt: attempt}, 1)
	if err == nil {
		err = a.err
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat: %w", err)
	}
	e.seen(ctx, worker, workerCall{heartbeat: true})
	return a.expires, nil
}

// renewCall is one heartbeat; renewAnswer its outcome.
type renewCall struct {
	taskID, worker string
	attempt        int
}

type renewAnswer struct {
	expires time.Time
	err     error
}

// renewRun renews the leases of calls in one transaction, each judged as
// it would be alone, in order (see orAlone).
func (e *Engine) renewRun(ctx context.Context, calls []renewCall) []renewAnswer {
	return orAlone(calls, func(calls []renewCall) ([]renewAnswer, error) { return e.renewLeases(ctx, calls) })
}

// renewLeases is renewRun's one transaction, and its error when it failed
// as a whole (every call then carries it).
func (e *Engine) renewLeases(ctx context.Context, calls []renewCall) ([]renewAnswer, error) {
	out := make([]renewAnswer, len(calls))
	leases := make([]leaseRef, len(calls))
	for i, c := range calls {
		leases[i] = leaseRef{task: c.taskID, worker: c.worker, attempt: c.attempt}
	}
	var changed []*domain.Task
	runs := 0
	err := e.tx(ctx, func(q store.Querier) error {
		runs++
		now := e.now()
		tasks, err := e.leaseTasks(ctx, q, leases, now, runs)
		if err != nil {
			return err
		}
		changed = changed[:0]
		renewed := make(map[string]bool, len(calls)) // a task heartbeated twice is written once
		for i, c := range calls {
			out[i] = renewAnswer{}
			t := tasks[c.taskID]
			if t == nil {
				out[i].err = fmt.Errorf("task %q does not exist: %w", c.taskID, domain.ErrNotFound)
				continue
			}
			domain.Focus(t, c.worker, c.attempt, now)
			if err := domain.CheckLease(t, c.worker, c.attempt, now); err != nil {
				out[i].err = err
				continue
			}
			domain.Renew(t, now)
			out[i].expires = t.LeaseExpiresAt
			if !renewed[t.ID] {
				renewed[t.ID] = true
				changed = append(changed, t)
			}
		}
		return q.TaskUpdateMany(ctx, changed)
	})
	if err != nil {
		for i := range out {
			out[i] = renewAnswer{err: err}
		}
		return out, err
	}
	e.held.refresh(changed...)
	return out, nil
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

// CompleteTaskParams is a worker's result for one task.
type CompleteTaskParams struct {
	TaskID   string
	WorkerID string
	Attempt  int
	Output   []byte
	Metrics  json.RawMessage // optional JSON object
	// Version is the version of the workload that gave Output, as the
	// worker announces it; the chunk cache remembers the output under it.
	// Empty: the output is not remembered.
	Version string

	owner     string // the lease owner WorkerID is, for the worker principal that sent it (CompleteTasks)
	trusted   bool   // whether that principal is trusted
	fromCache bool   // Output is the chunk cache's, not the worker's (serveFromCache)
}

// leaseOwner is the lease owner p's lease is held by.
func (p *CompleteTaskParams) leaseOwner() string { return cmp.Or(p.owner, p.WorkerID) }

// ItemResult is the outcome of one item of CompleteTasks.
type ItemResult struct {
	Task *TaskView // set on success
	Err  error
}

// CompleteTask records a chunk task's output for the live lease (worker,
// attempt). The output must be CSV with the job's score column, at most
// top_k rows and finite scores; otherwise ErrInvalidArgument and the lease
// stays. Replaying the recorded result changes nothing. Results that
// arrive together are written in one transaction, each judged as it
// would be alone.
func (e *Engine) CompleteTask(ctx context.Context, p CompleteTaskParams) (*TaskView, error) {
	r := e.CompleteTasks(ctx, []CompleteTaskParams{p})[0]
	return r.Task, r.Err
}

// CompleteTasks records several results in one transaction, shared with
// the results of other calls that arrive together. Each item is judged on
// its own, exactly as CompleteTask would judge it alone, in order: of two
// results for one task, the second sees the first.
func (e *Engine) CompleteTasks(ctx context.Context, items []CompleteTaskParams) []ItemResult {
	pr := domain.PrincipalOf(ctx)
	items = slices.Clone(items)
	for i := range items {
		items[i].owner, items[i].trusted = pr.LeaseOwner(items[i].WorkerID), pr.Trusted
	}
	out, err := e.results.do(ctx, items, len(items))
	if err != nil {
		out = make([]ItemResult, len(items))
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}

// resultRun records the results of calls that arrived together in one
// transaction (see orAlone).
func (e *Engine) resultRun(ctx context.Context, calls [][]CompleteTaskParams) [][]ItemResult {
	var items []CompleteTaskParams
	for _, c := range calls {
		items = append(items, c...)
	}
	all := orAlone(items, func(items []CompleteTaskParams) ([]ItemResult, error) { return e.completeTasks(ctx, items) })
	out := make([][]ItemResult, len(calls))
	for i, c := range calls {
		out[i], all = all[:len(c):len(c)], all[len(c):]
	}
	return out
}

// completeTasks is CompleteTasks, and the error of the transaction when
// it failed as a whole (every item that reached it then carries it).
func (e *Engine) completeTasks(ctx context.Context, items []CompleteTaskParams) ([]ItemResult, error) {
	out := make([]ItemResult, len(items))
	valid := make([]int, 0, len(items)) // indexes of items that passed validation
	for i, p := range items {
		if err := checkResultForm(p); err != nil {
			out[i].Err = err
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out, nil
	}
	// Outputs are checked against their job's settings before the
	// transaction: reading a job inside it would hold one connection
	// while waiting for another. A chunk task's ID names its job.
	checked := make([]string, len(items)) // the job each output was checked against
	rows := make([]int, len(items))       // and the rows it has
	keep := valid[:0]
	for _, i := range valid {
		jobID, ok := chunkJobID(items[i].TaskID)
		if !ok {
			keep = append(keep, i) // not a chunk task: the transaction says what it is
			continue
		}
		j, err := e.jobSettings(ctx, jobID)
		if errors.Is(err, domain.ErrNotFound) {
			keep = append(keep, i) // no such task either: the transaction says so
			continue
		}
		var parsed *table.Output
		if err == nil {
			parsed, err = checkOutput(j, items[i].TaskID, items[i].Output)
		}
		var fault error
		if err == nil {
			rows[i] = len(parsed.Rows)
			if len(j.Columns) > 0 {
				fault, err = e.checkOutputIDs(ctx, j, items[i].TaskID, items[i].leaseOwner(), items[i].Attempt, parsed)
			}
		}
		if fault != nil {
			// Run again, the same command on the same input gives the
			// same ids. (The ballots of a vote have IDs of another form:
			// an output they agree on is checked by the stitch.)
			out[i].Task, out[i].Err = e.FailTask(ctx, FailTaskParams{
				TaskID: items[i].TaskID, WorkerID: items[i].WorkerID, Attempt: items[i].Attempt, Error: fault.Error(),
			})
			continue
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		checked[i] = jobID
		keep = append(keep, i)
	}
	valid = keep
	if len(valid) == 0 {
		return out, nil
	}
	written := make([]*domain.Task, len(items))
	leases := make([]leaseRef, len(valid))
	for k, i := range valid {
		leases[k] = leaseRef{task: items[i].TaskID, worker: items[i].leaseOwner(), attempt: items[i].Attempt}
	}
	var changed, voted []*domain.Task
	stitchReady := false
	completed := 0           // tasks completed, replays left out
	var added []*domain.Task // replicas made for votes
	var closed []string      // the jobs of the votes that ended
	runs := 0
	err := e.tx(ctx, func(q store.Querier) error {
		runs++
		stitchReady = false
		completed, added, closed = 0, added[:0], closed[:0]
		changed, voted = changed[:0], voted[:0]
		var remember []store.CacheEntry // outputs the chunk cache keeps
		cached := map[string]int{}      // job ID → its chunks the cache completed
		now := e.now()
		tasks, err := e.leaseTasks(ctx, q, leases, now, runs)
		if err != nil {
			return err
		}
		done := map[string]int{}   // downstream ID → newly completed upstreams
		ended := map[string]bool{} // replica ID → its worker is trusted
		for _, i := range valid {
			p := items[i]
			written[i], out[i].Err = nil, nil
			t := tasks[p.TaskID] // shared by the items of one task: each sees those before it
			if t == nil {
				out[i].Err = fmt.Errorf("task %q does not exist: %w", p.TaskID, domain.ErrNotFound)
				continue
			}
			if !t.Kind.ScoresRows() {
				out[i].Err = fmt.Errorf("task %s is run by coordinators, not workers: %w", t.ID, domain.ErrLeaseLost)
				continue
			}
			if checked[i] != t.JobID {
				// Not checked before (an ID that does not name its job):
				// the job's settings come from memory or this transaction.
				j, err := e.jobSettingsIn(ctx, q, t.JobID)
				if err != nil {
					return err
				}
				parsed, err := checkOutput(j, t.ID, p.Output)
				if err != nil {
					out[i].Err = err
					continue
				}
				rows[i] = len(parsed.Rows)
			}
			outcome, err := domain.Complete(t, p.leaseOwner(), p.Attempt, p.Output, p.Metrics, now)
			if err != nil {
				out[i].Err = err
				continue
			}
			written[i] = t
			if outcome == domain.Replayed {
				continue
			}
			if p.fromCache {
				t.LeasedAt = time.Time{} // not run: no time to charge, and none among the job's chunk times
				cached[t.JobID]++
			} else {
				charge(q, t, now)
				if s := domain.SecondTask(t); s != nil {
					charge(q, s, now) // the other attempt, which lost
				}
				workerDid(q, p.leaseOwner(), now)
			}
			changed = append(changed, t)
			if t.Kind == domain.KindReplica {
				ended[t.ID] = p.trusted // its vote is tallied below
				continue
			}
			completed++
			if t.DownstreamID != "" {
				done[t.DownstreamID]++
			}
			if p.Version != "" && t.Kind == domain.KindChunk {
				entry, err := e.cacheEntry(ctx, q, t, p, rows[i], now)
				if err != nil {
					return err
				}
				if entry != nil {
					remember = append(remember, *entry)
				}
			}
		}
		if err := q.CachePut(ctx, remember); err != nil {
			return err
		}
		// A vote's chunk is locked before its replicas are written
		// (lockVotes); the verdicts are written with them.
		locked, err := e.lockVotes(ctx, q, changed...)
		if err != nil {
			return err
		}
		var v vote
		if len(ended) > 0 {
			fresh := make(map[string]*domain.Task, len(changed))
			for _, t := range changed {
				fresh[t.ID] = t
			}
			if v, err = e.tallyVotes(ctx, q, locked, ended, fresh, now); err != nil {
				return err
			}
		}
		if err := q.TaskUpdateMany(ctx, append(changed, v.writes...)); err != nil {
			return err
		}
		// After the tasks, in the order failJob takes a job and its tasks.
		for _, job := range sortedKeys(cached) {
			if err := q.JobAddCached(ctx, job, cached[job]); err != nil {
				return err
			}
		}
		if err := e.finishVotes(ctx, q, v, now); err != nil {
			return err
		}
		voted = append(voted, v.stopped...)
		added = append(added, v.added...)
		for _, c := range v.failed {
			closed = append(closed, c.JobID)
		}
		for _, c := range v.accepted {
			closed = append(closed, c.JobID)
			voted = append(voted, c)
			completed++
			done[c.DownstreamID]++
		}
		// Downstream counters last: they are the rows most contended.
		for _, id := range sortedKeys(done) {
			d, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: id, N: done[id], Now: now})
			if err != nil {
				return err
			}
			if d.State == domain.TaskPending {
				stitchReady = true
			}
		}
		return nil
	})
	if err != nil {
		for _, i := range valid {
			out[i] = ItemResult{Err: fmt.Errorf("record result of task %s: %w", items[i].TaskID, err)}
		}
		return out, err
	}
	e.held.forget(changed...)
	e.held.forget(voted...)
	for _, job := range closed {
		e.voting.add(job, -1)
	}
	if stitchReady {
		e.stitch.Notify()
	}
	for _, r := range added {
		e.notifyWork(domain.KindChunk, r.Workload, 1) // replicas are claimed as chunks
	}
	if completed > 0 || len(voted) > 0 {
		e.cfg.Observer.Completed(domain.KindChunk, completed)
		e.jobChanged(written...)
	}
	for _, i := range valid {
		if t := written[i]; t != nil {
			out[i].Task, out[i].Err = e.taskView(ctx, t)
		}
	}
	return out, nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkResultForm checks what a result says of itself, before any read.
func checkResultForm(p CompleteTaskParams) error {
	if err := domain.CheckLeaseRequest(p.WorkerID, p.Attempt); err != nil {
		return err
	}
	if len(p.Metrics) > 0 && (p.Metrics[0] != '{' || !json.Valid(p.Metrics)) {
		return domain.Invalidf("metrics must be a JSON object")
	}
	if p.Version != "" && !domain.ValidVersion(p.Version) {
		return domain.Invalidf("workload_version %q must be 1-128 characters of A-Z a-z 0-9 . _ : + -", p.Version)
	}
	if !domain.ValidID(p.TaskID) {
		return fmt.Errorf("task %q does not exist: %w", p.TaskID, domain.ErrNotFound)
	}
	return nil
}

// checkOutput checks the output of chunk task taskID against its job's
// settings and returns it parsed; a bad one is ErrInvalidArgument.
func checkOutput(j *domain.Job, taskID string, output []byte) (*table.Output, error) {
	out, err := table.ParseOutput(output, j.ScoreColumn, j.TopK)
	if err != nil {
		return nil, fmt.Errorf("result of task %s: %w", taskID, err)
	}
	return out, nil
}

// chunkJobID returns the job of a chunk task's ID, JOB-INDEX, as CreateJob
// names them; ok is false for IDs of another form.
func chunkJobID(taskID string) (jobID string, ok bool) {
	i := strings.LastIndexByte(taskID, '-')
	if i <= 0 || i == len(taskID)-1 {
		return "", false
	}
	for _, c := range taskID[i+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return taskID[:i], true
}

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
		chargeLapsed(q, t, now)
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

// reapBatch bounds the expired leases handled per pass.
const reapBatch = 500

// sweepEvery rate-limits the sweep (expiry, the end of backoffs) that runs
// before claims.
const sweepEvery = 100 * time.Millisecond

// runnableBatch bounds the tasks one MakeRunnable call takes out of
// backoff.
const runnableBatch = 1000

func (e *Engine) sweepBeforeClaim(ctx context.Context) {
	now := e.now() // the engine's clock, which tests move
	e.sweepMu.Lock()
	if d := now.Sub(e.lastSweep); d >= 0 && d < sweepEvery {
		e.sweepMu.Unlock()
		return
	}
	e.lastSweep = now
	e.sweepMu.Unlock()
	if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "sweep before claim failed", "error", err)
	}
}

// Sweep ends expired leases (ExpireLeases), then makes the tasks whose
// backoff passed claimable (MakeRunnable); it returns how many tasks it
// changed. The reaper runs it, and so do claims, at most every
// sweepEvery.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	n, err := e.ExpireLeases(ctx)
	if err != nil {
		return n, err
	}
	m, err := e.MakeRunnable(ctx)
	return n + m, err
}

// MakeRunnable makes the tasks whose backoff passed claimable, and returns
// how many. Claims see a task in backoff only once this has run after its
// backoff passed.
func (e *Engine) MakeRunnable(ctx context.Context) (int, error) {
	n := 0
	for {
		m, err := e.store.TaskMakeRunnable(ctx, &store.TaskMakeRunnableParams{Now: e.now(), Limit: runnableBatch})
		if err != nil {
			return n, mapStoreErr(fmt.Errorf("end backoffs: %w", err))
		}
		n += m
		if m > 0 {
			e.workEpoch.Add(1) // no claimer is woken: they poll
		}
		if m < runnableBatch {
			return n, nil
		}
	}
}

// ExpireLeases ends every lease expired by now: its task goes back to
// pending while attempts remain, else fails with its job. A lease that ran
// out because its attempt reached its deadline (the job's timeout_seconds;
// a lease never outlasts it) is a timed-out attempt: a retryable failure,
// retried after the usual backoff. It returns how many leases it ended.
func (e *Engine) ExpireLeases(ctx context.Context) (int, error) {
	n := 0
	for {
		expired, err := e.store.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: e.now(), Limit: reapBatch})
		if err != nil {
			return n, mapStoreErr(fmt.Errorf("list expired leases: %w", err))
		}
		for _, c := range expired {
			ok, err := e.expire(ctx, c.ID)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
		if len(expired) < reapBatch {
			return n, nil
		}
	}
}

// expiredBallot returns the replica task of a ballot of c, being voted
// on, whose lease expired by now; nil when none did. The reaper finds c
// again while another has.
func expiredBallot(ctx context.Context, q store.Querier, c *domain.Task, now time.Time) (*domain.Task, error) {
	for _, b := range c.Ballots {
		if b.State == domain.TaskLeased && !now.Before(b.LeaseExpiresAt) {
			return q.TaskGet(ctx, domain.ReplicaID(c.ID, b.N))
		}
	}
	return nil, nil
}

func (e *Engine) expire(ctx context.Context, id string) (bool, error) {
	var ended *domain.Task
	var owner string
	var timedOut bool
	err := e.tx(ctx, func(q store.Querier) error {
		ended, timedOut = nil, false
		t, err := q.TaskGet(ctx, id)
		if err != nil {
			return err
		}
		now := e.now()
		if t.State != domain.TaskLeased || now.Before(t.LeaseExpiresAt) {
			return nil // renewed, completed or already expired by another process
		}
		if t.LeaseOwner == domain.QuorumLeaseOwner {
			// Being voted on: its lease ends with its earliest ballot's.
			if t, err = expiredBallot(ctx, q, t, now); t == nil || err != nil {
				return err
			}
		}
		if _, err := e.lockVotes(ctx, q, t); err != nil {
			return err
		}
		owner = t.LeaseOwner
		ended = t
		reason := fmt.Sprintf("lease of attempt %d expired: worker %q stopped heartbeating", t.Attempt, t.LeaseOwner)
		if t.Kind == domain.KindStitch {
			reason = fmt.Sprintf("stitch lease of attempt %d expired: coordinator %q stopped", t.Attempt, t.LeaseOwner)
		}
		charge(q, t, now) // as ended when its lease ran out
		chargeLapsed(q, t, now)
		var final bool
		timedOut, final = domain.ExpireLease(t, reason, domain.Backoff(t.Attempt, e.cfg.Jitter()), now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		if final {
			return e.failedForGood(ctx, q, t, now)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expire lease of task %s: %w", id, err)
	}
	if ended == nil {
		return false, nil
	}
	e.held.refresh(ended) // still leased when the task's other attempt goes on
	e.jobChanged(ended)
	if timedOut {
		e.cfg.Observer.Failed(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "task attempt timed out", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State, "error", ended.Error)
	} else {
		e.cfg.Observer.Expired(ended.Kind, ended.State == domain.TaskFailed)
		e.log.InfoContext(ctx, "lease expired", "task_id", ended.ID, "job_id", ended.JobID, "worker_id", owner,
			"attempt", ended.Attempt, "state", ended.State)
	}
	if ended.Kind == domain.KindReplica {
		e.notifyWork(domain.KindChunk, ended.Workload, domain.MaxQuorum) // the replicas its vote may have added
	}
	if ended.State == domain.TaskPending && !ended.RunAfter.After(e.now()) {
		if ended.Kind == domain.KindStitch {
			e.stitch.Notify()
		} else {
			e.notifyWork(ended.Kind, ended.Workload, 1)
		}
	}
	return true, nil
}
