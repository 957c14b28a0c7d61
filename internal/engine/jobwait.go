package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// MaxJobWait bounds how long WaitJob waits for a job to change.
const MaxJobWait = 60 * time.Second

// JobRecheck is how often WaitJob reads the job's marker while it waits,
// for changes it is not told about: those made by other processes sharing
// the store.
const JobRecheck = 250 * time.Millisecond

// JobChangeDelay is how soon after a wait began WaitJob may answer a
// change that leaves the job unfinished. Each answer counts the job's
// tasks, a read that grows with its chunks, so that a waiter on a busy job
// costs about one count a second, as a client polling every second would;
// a job that becomes final is answered at once.
const JobChangeDelay = time.Second

// jobRecheckGap is the least time between two reads of a waited-on job's
// marker woken by its progress: a busy job is notified on every result,
// and a burst of notifications costs one read. Once a change is seen
// WaitJob heeds only the job's end, which it reads at once.
const jobRecheckGap = 25 * time.Millisecond

// progressToken is what a job's progress_token encodes: the versions of
// the job's row and of its stitch root's (store.JobMarker), and when the
// state they mark began. Every change of the job's status writes the job;
// every chunk that completes writes the root (its count of pending
// upstreams drops), and one that fails for good or is cancelled fails or
// cancels the job. What moves neither is a chunk that is leased or goes
// back to pending (claims after the job's first, retryable failures,
// expired leases, releases): the token misses the pending and leased
// counts moving between each other, which the next answer shows.
type progressToken struct {
	job, root int64
	at        int64 // unix milliseconds: store.JobMarker.UpdatedAt
}

func (t progressToken) String() string {
	return strconv.FormatInt(t.job, 10) + "." + strconv.FormatInt(t.root, 10) + "." + strconv.FormatInt(t.at, 10)
}

// marks reports whether t marks the state that m reads.
func (t progressToken) marks(m store.JobMarker) bool {
	return t.job == m.Version && t.root == m.RootVersion
}

// parseProgressToken reads a token that String wrote.
func parseProgressToken(s string) (progressToken, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return progressToken{}, false
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 || p[0] == '+' {
			return progressToken{}, false
		}
		n[i] = v
	}
	return progressToken{job: n[0], root: n[1], at: n[2]}, true
}

// ProgressToken returns a marker of the job's progress, opaque to clients,
// who pass it back to WaitJob: it changes whenever the job's status or its
// counts of completed, failed or cancelled chunks change (see
// progressToken). It was read no later than the counts of the view, so a
// token never claims a change that the view does not show.
func (v *JobView) ProgressToken() string {
	return progressToken{job: v.Version, root: v.rootVersion, at: v.markedAt.UnixMilli()}.String()
}

// WaitJob returns job id once it is final or its progress token differs
// from after, waiting up to wait for that; after "" returns at once, as
// does wait 0. When wait runs out it returns the job as it is. An after
// that is no progress token is ErrInvalidArgument.
//
// While it waits it reads the job's marker (store.JobListMarkers: two rows
// by their keys) when woken by a change in this process and every
// JobRecheck, and counts the job's tasks only to answer. A change that
// leaves the job unfinished is answered no sooner than JobChangeDelay
// after the call began; a final job at once. A token already stale when
// the call comes is answered at once too, unless the state it marks began
// less than JobChangeDelay ago: then no sooner than JobChangeDelay after
// that. On a busy job every answer's token is stale a moment later, and
// a client that asks again at once, as it should, would otherwise have
// the tasks counted as fast as it can ask. Each waiting call holds one of
// the process's stream slots; when none is free it does not wait but
// returns the job at once.
func (e *Engine) WaitJob(ctx context.Context, id, after string, wait time.Duration) (*JobView, error) {
	if wait < 0 || wait > MaxJobWait {
		return nil, domain.Invalidf("wait is %v; it must be between 0 and %v", wait, MaxJobWait)
	}
	var seen progressToken
	if after != "" {
		var ok bool
		if seen, ok = parseProgressToken(after); !ok {
			return nil, domain.Invalidf("after %.64q is not a progress_token; pass the progress_token of an earlier answer about job %s", after, id)
		}
	}
	if wait == 0 || after == "" {
		return e.GetJob(ctx, id)
	}
	if _, err := e.clientJobSettings(ctx, id); err != nil {
		return nil, err // another account's job: not even its changes are waited for
	}
	began := time.Now()
	changes, done := e.jobWatchers.watch(id)
	defer done()
	ends, doneEnds := e.jobEnds.watch(id)
	defer doneEnds()
	woken, ended := changes.Wait(), ends.Wait() // before reading, so that no change is missed
	m, err := e.jobMarker(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Status.Final() {
		return e.GetJob(ctx, id)
	}
	var held <-chan time.Time // once a change is seen: when to answer it
	if !seen.marks(m) {
		left := min(time.UnixMilli(seen.at).Add(JobChangeDelay).Sub(e.now()), JobChangeDelay)
		if left <= 0 {
			return e.GetJob(ctx, id)
		}
		held = time.After(left)
	}
	release, err := e.streams.take()
	if errors.Is(err, domain.ErrBusy) {
		return e.GetJob(ctx, id) // at the cap: answer at once rather than refuse
	}
	if err != nil {
		return nil, err
	}
	defer release()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(JobRecheck)
	defer tick.Stop()
	last := time.Now() // of the last read
	for {
		progress := woken
		if held != nil {
			progress = nil // a change is seen: only the job's end is news now
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return e.GetJob(ctx, id)
		case <-held:
			return e.GetJob(ctx, id)
		case <-ended:
		case <-tick.C:
		case <-progress:
			if d := jobRecheckGap - time.Since(last); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-ended:
					t.Stop()
				case <-t.C:
				}
			}
		}
		woken, ended = changes.Wait(), ends.Wait()
		last = time.Now()
		if m, err = e.jobMarker(ctx, id); err != nil {
			return nil, err
		}
		switch {
		case m.Status.Final():
			return e.GetJob(ctx, id)
		case held == nil && !seen.marks(m):
			left := JobChangeDelay - time.Since(began)
			if left <= 0 {
				return e.GetJob(ctx, id)
			}
			held = time.After(left) // meanwhile a final status still answers at once
		}
	}
}

// jobMarker reads job id's marker; a job still creating does not exist.
func (e *Engine) jobMarker(ctx context.Context, id string) (store.JobMarker, error) {
	ms, err := e.store.JobListMarkers(ctx, []string{id})
	if err != nil {
		return store.JobMarker{}, mapStoreErr(fmt.Errorf("read job %s: %w", id, err))
	}
	m, ok := ms[id]
	if !ok {
		return store.JobMarker{}, notFound(store.ErrNotFound, "job %q", id)
	}
	return m, nil
}

// jobEnded wakes the WaitJob calls waiting on job id, which became final.
func (e *Engine) jobEnded(id string) {
	e.jobWatchers.notify(id)
	e.jobEnds.notify(id)
}

// jobChanged wakes the WaitJob calls waiting on the jobs of tasks; a task
// that failed for good failed its job.
func (e *Engine) jobChanged(tasks ...*domain.Task) {
	last := "" // the job just woken: a repeat of it right after is skipped
	for _, t := range tasks {
		switch {
		case t == nil || t.JobID == "":
		case t.State == domain.TaskFailed:
			e.jobEnded(t.JobID)
		case t.JobID != last:
			e.jobWatchers.notify(t.JobID)
			last = t.JobID
		}
	}
}
