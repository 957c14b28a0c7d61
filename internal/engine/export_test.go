package engine

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// SetStitchPageHook makes e call fn after merging each page of a job's
// chunk outputs, to stop a stitch in its middle. Call it before Run.
func (e *Engine) SetStitchPageHook(fn func(jobID string, page int)) { e.stitchPageHook = fn }

// SetStitchPageBytes makes e's stitcher aim at n bytes of chunk outputs
// per page instead of the default, so that small tests can tell a bounded
// stitch from one that reads every output at once.
func (e *Engine) SetStitchPageBytes(n int) { e.pageBytes = n }

// RenewTogether renews the leases (ids[i], workers[i], attempts[i]) in the
// one transaction of a run of the heartbeats' group commit, as concurrent
// heartbeats are, and returns that transaction's error (nil unless it
// failed as a whole, when a run would fall back to each call alone).
func (e *Engine) RenewTogether(ctx context.Context, ids, workers []string, attempts []int) ([]time.Time, []error, error) {
	calls := make([]renewCall, len(ids))
	for i := range ids {
		calls[i] = renewCall{taskID: ids[i], worker: workers[i], attempt: attempts[i]}
	}
	var expires []time.Time
	var errs []error
	answers, txErr := e.renewLeases(ctx, calls)
	for _, a := range answers {
		expires, errs = append(expires, a.expires), append(errs, a.err)
	}
	return expires, errs, txErr
}

// CompleteTogether records items in the one transaction of a run of the
// results' group commit and returns that transaction's error, as
// RenewTogether does.
func (e *Engine) CompleteTogether(ctx context.Context, items []CompleteTaskParams) ([]ItemResult, error) {
	return e.completeTasks(ctx, items)
}

// ClaimTogether serves single claims of chunk tasks by workers as one run
// of the claims' group commit, as concurrent single claims are; a caller
// that got nothing has a nil task.
func (e *Engine) ClaimTogether(ctx context.Context, workers []string) ([]*domain.Task, []error) {
	calls := make([]claimCall, len(workers))
	for i, w := range workers {
		calls[i] = claimCall{worker: w, n: 1, kind: domain.KindChunk}
	}
	var tasks []*domain.Task
	var errs []error
	for _, a := range e.claimRun(ctx, calls) {
		var t *domain.Task
		if len(a.tasks) > 0 {
			t = a.tasks[0]
		}
		tasks, errs = append(tasks, t), append(errs, a.err)
	}
	return tasks, errs
}

// CompleteTreesTogether records tree results (ids[i], workers[i],
// attempts[i], results[i]) in the one transaction of a run of their group
// commit, and returns that transaction's error, as RenewTogether does.
func (e *Engine) CompleteTreesTogether(ctx context.Context, ids, workers []string, attempts []int, results []string) ([]error, error) {
	items := make([]treeDone, len(ids))
	for i := range ids {
		items[i] = treeDone{taskID: ids[i], worker: workers[i], attempt: attempts[i], result: []byte(results[i])}
	}
	return e.completeTrees(ctx, items)
}

// ClaimOpenTogether serves an open claim of one task by each worker of
// principals in the one transaction of a run of the open claims' group
// commit, as claims that arrive together are, and returns the IDs each
// got.
func (e *Engine) ClaimOpenTogether(principals []domain.Principal, workers []string) ([][]string, error) {
	calls := make([]openClaimCall, len(workers))
	for i, w := range workers {
		calls[i] = openClaimCall{worker: principals[i].LeaseOwner(w), n: 1, pr: principals[i]}
	}
	out := make([][]string, len(calls))
	for i, a := range e.openClaimRun(context.Background(), calls) {
		if a.err != nil {
			return nil, a.err
		}
		for _, t := range a.tasks {
			out[i] = append(out[i], t.ID)
		}
	}
	return out, nil
}

// CacheKey is the chunk cache's key of a chunk of j with the input
// inputSHA256 run by version, for tests that read the cache in the store.
func CacheKey(j *domain.Job, version, inputSHA256 string) string {
	return cacheKey(j, version, inputSHA256)
}
