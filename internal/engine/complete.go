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
			chargeSecond(q, t, now) // the other attempt, which lost
			if p.fromCache {
				t.LeasedAt = time.Time{} // not run: no time to charge, and none among the job's chunk times
				cached[t.JobID]++
			} else {
				charge(q, t, now)
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
