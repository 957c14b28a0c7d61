package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Backups of stragglers (domain.Speculate). A trusted worker whose claim
// finds nothing to run takes a backup of a chunk that holds its job
// back: one of a job with no pending chunk, at least
// domain.SpeculateMinCompleted chunks run and completed, leased for
// longer than the job's speculate_after times the median time those
// took. Candidates are the leases this engine handed out (held), so a
// coordinator backs up the chunks it leased; each candidate is read
// again, and leased a second time, in a transaction.

// minBackupAge is the shortest lease a backup is considered for, so
// that an idle worker's every poll does not read the medians of jobs
// whose chunks take milliseconds.
const minBackupAge = 500 * time.Millisecond

// claimBackup leases to worker p.WorkerID a backup of one straggling
// chunk of p.Workloads, or returns none.
func (e *Engine) claimBackup(ctx context.Context, p ClaimTasksParams) ([]*TaskView, error) {
	now := e.now()
	for _, c := range e.held.chunksLeasedBefore(now.Add(-minBackupAge), now, p.Workloads, p.WorkerID) {
		if !domain.CanSpeculate(&c, p.WorkerID, now) {
			continue // backed up already, or on its last attempt
		}
		j, err := e.jobSettings(ctx, c.JobID)
		if err != nil || j.SpeculateAfter == 0 {
			continue
		}
		median, err := e.chunkTimes.median(ctx, e.store, j.ID, now)
		if err != nil {
			e.log.WarnContext(ctx, "could not read a job's chunk times for backups", "job_id", j.ID, "error", err)
			continue
		}
		if median == 0 || now.Sub(c.LeasedAt) <= time.Duration(j.SpeculateAfter*float64(median)) {
			continue
		}
		t, err := e.speculate(ctx, c.ID, p.WorkerID)
		if err != nil {
			return nil, err
		}
		if t == nil {
			continue // changed since this engine's snapshot
		}
		views, err := e.answerClaim(ctx, []*domain.Task{t})
		if err != nil {
			return nil, err
		}
		e.log.InfoContext(ctx, "backup leased", "task_id", t.ID, "job_id", t.JobID, "worker_id", p.WorkerID,
			"attempt", t.Attempt, "straggler", t.Second.Owner, "leased_for", now.Sub(c.LeasedAt).String(), "median", median.String())
		return views, nil
	}
	return nil, nil
}

// speculate leases chunk id a second time to worker, when it may be
// (domain.CanSpeculate) as it is now; nil when not.
func (e *Engine) speculate(ctx context.Context, id, worker string) (*domain.Task, error) {
	var leased *domain.Task
	err := e.tx(ctx, func(q store.Querier) error {
		leased = nil
		t, err := q.TaskGet(ctx, id)
		if err != nil {
			return err
		}
		now := e.now()
		if !domain.CanSpeculate(t, worker, now) {
			return nil
		}
		chargeLapsed(q, t, now) // the backup before, if any, whose lease ran out
		domain.Speculate(t, worker, now)
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		leased = t
		return nil
	})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("lease a backup of task %s: %w", id, err))
	}
	if leased != nil {
		e.held.keep(e.now(), leased)
	}
	return leased, nil
}

// chunkTimes remembers, for a short while, the median time the run
// chunks of jobs took, or 0 while a job may not have backups (chunks
// pending, too few completed).
type chunkTimes struct {
	mu sync.Mutex
	m  map[string]chunkTime
}

type chunkTime struct {
	median time.Duration
	at     time.Time
}

// Bounds of chunkTimes: how long a median serves, and for how many jobs.
const (
	chunkTimesFresh = time.Second
	chunkTimesMax   = 256
)

// median returns the median time job's chunks took to run, and 0 when
// it has a pending chunk or fewer than domain.SpeculateMinCompleted
// chunks were run and completed.
//
// One caller a second reads it from the store: the others meanwhile get
// the median read before (0 at first), so that idle workers claiming
// together do not each read every completed chunk of the job.
func (c *chunkTimes) median(ctx context.Context, s store.Store, job string, now time.Time) (time.Duration, error) {
	c.mu.Lock()
	m, ok := c.m[job]
	if ok && now.Sub(m.at) < chunkTimesFresh {
		c.mu.Unlock()
		return m.median, nil
	}
	if c.m == nil || len(c.m) >= chunkTimesMax {
		c.m = map[string]chunkTime{}
	}
	c.m[job] = chunkTime{median: m.median, at: now} // this caller reads
	c.mu.Unlock()
	median, err := readMedian(ctx, s, job)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.m[job] = chunkTime{median: median, at: now}
	c.mu.Unlock()
	return median, nil
}

// readMedian is chunkTimes.median read from the store.
func readMedian(ctx context.Context, s store.Store, job string) (time.Duration, error) {
	counts, err := s.TaskCountByJob(ctx, []string{job})
	if err != nil {
		return 0, mapStoreErr(fmt.Errorf("count the chunks of job %s: %w", job, err))
	}
	if c := counts[job]; c.Pending > 0 || c.Completed < domain.SpeculateMinCompleted {
		return 0, nil
	}
	var times []time.Duration
	after := -1
	for {
		tasks, err := s.TaskList(ctx, &store.TaskListParams{JobID: job, Kind: domain.KindChunk, State: domain.TaskCompleted,
			Limit: 1000, AfterIndex: after})
		if err != nil {
			return 0, mapStoreErr(fmt.Errorf("list the completed chunks of job %s: %w", job, err))
		}
		for _, t := range tasks {
			if !t.LeasedAt.IsZero() { // not from the chunk cache
				times = append(times, t.FinishedAt.Sub(t.LeasedAt))
			}
		}
		if len(tasks) < 1000 {
			break
		}
		after = tasks[len(tasks)-1].ChunkIndex
	}
	if len(times) < domain.SpeculateMinCompleted {
		return 0, nil
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}
