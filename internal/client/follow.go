package client

import (
	"context"
	"fmt"
	"time"
)

// followWait is how long each of Follow's calls waits on the coordinator.
const followWait = 30 * time.Second

// Follow follows job id until it is final and returns it. It calls seen
// with each state of the job it gets, and retrying with each error it
// rides out (a coordinator that cannot be reached, or answers 5xx). Any
// other error, or the end of ctx, stops it.
func (c *Client) Follow(ctx context.Context, id string, seen func(*Job), retrying func(error)) (*Job, error) {
	// Each call long-polls the coordinator for the next change since the
	// progress token last seen; the coordinator paces its answers (about
	// one a second while the job runs, at once when it ends), so asking
	// again at once is right. A coordinator that answers at once with
	// nothing new (one that holds all its streams, or knows no tokens) is
	// polled again after poll, short at first and up to a second.
	poll := 100 * time.Millisecond
	after := ""
	for {
		asked := time.Now()
		job, err := c.WaitJob(ctx, id, after, followWait)
		switch {
		case err == nil:
			seen(job)
			if job.Final() {
				return job, nil
			}
			changed := job.ProgressToken != after
			after = job.ProgressToken
			if after != "" && (changed || time.Since(asked) >= followWait/2) {
				poll = 100 * time.Millisecond
				continue // it waited, or there is news: ask again at once
			}
		case ctx.Err() != nil: // stopped while the coordinator held the call
		case IsRetryable(err):
			retrying(err)
		default:
			return nil, fmt.Errorf("follow job %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped waiting for job %s (it goes on; see 'scimesh status %s'): %w", id, id, ctx.Err())
		case <-time.After(poll):
			poll = min(poll*3/2, time.Second)
		}
	}
}
