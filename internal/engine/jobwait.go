package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// MaxJobWait bounds how long WaitJob waits for a job to change.
const MaxJobWait = 60 * time.Second

// JobRecheck is how often WaitJob reads the job again while it waits, for
// changes it is not told about: those made by other processes sharing the
// store, and those this process does not announce.
const JobRecheck = 250 * time.Millisecond

// ProgressToken returns a marker of the job's progress: it changes whenever
// the job's status or version or the counts of its tasks by state change.
// It is opaque to clients, who pass it back to WaitJob.
func (v *JobView) ProgressToken() string {
	c := v.Tasks
	return fmt.Sprintf("%s.%d.%d.%d.%d.%d.%d.%d.%d", v.Status, v.Version, v.UpdatedAt.UnixNano(),
		c.Waiting, c.Pending, c.Leased, c.Completed, c.Failed, c.Cancelled)
}

// WaitJob returns job id once it is final or its progress token differs
// from after, waiting up to wait for that; after "" returns at once, as
// does wait 0. When wait runs out it returns the job as it is. Each waiting
// call holds one of the process's stream slots; when none is free it does
// not wait but returns the job at once.
func (e *Engine) WaitJob(ctx context.Context, id, after string, wait time.Duration) (*JobView, error) {
	if wait < 0 || wait > MaxJobWait {
		return nil, domain.Invalidf("wait is %v; it must be between 0 and %v", wait, MaxJobWait)
	}
	v, err := e.GetJob(ctx, id)
	if err != nil || wait == 0 || after == "" || v.Status.Final() || v.ProgressToken() != after {
		return v, err
	}
	release, err := e.streams.take()
	if errors.Is(err, domain.ErrBusy) {
		return v, nil // at the cap: answer at once rather than refuse
	}
	if err != nil {
		return nil, err
	}
	defer release()
	b, done := e.jobWatchers.watch(id)
	defer done()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(JobRecheck)
	defer tick.Stop()
	for {
		woken := b.Wait() // before reading, so that no change is missed
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return e.GetJob(ctx, id)
		case <-woken:
		case <-tick.C:
		}
		v, err = e.GetJob(ctx, id)
		if err != nil || v.Status.Final() || v.ProgressToken() != after {
			return v, err
		}
	}
}

// jobChanged wakes the WaitJob calls waiting on the jobs of tasks.
func (e *Engine) jobChanged(tasks ...*domain.Task) {
	for i, t := range tasks {
		if t == nil || t.JobID == "" {
			continue
		}
		seen := false
		for _, u := range tasks[:i] {
			if u != nil && u.JobID == t.JobID {
				seen = true
				break
			}
		}
		if !seen {
			e.jobWatchers.notify(t.JobID)
		}
	}
}
