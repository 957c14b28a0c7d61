package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads for people: the dashboard and the metrics. None of them is on a
// worker's path but seen, which records a worker's call at most every
// seenEvery per worker and process.

// seenEvery bounds how often one process records that a worker called.
const seenEvery = 5 * time.Second

// seenLog remembers when this process last recorded each worker.
type seenLog struct {
	mu   sync.Mutex
	last map[string]seenAt
}

type seenAt struct{ call, beat time.Time }

// seen records that worker called (a claim or poll; with heartbeat, a lease
// renewal), unless this process did so recently. A failure to record is
// logged and otherwise ignored: it costs the dashboard a little freshness.
func (e *Engine) seen(ctx context.Context, worker string, heartbeat bool) {
	now := e.now()
	e.seenLog.mu.Lock()
	s := e.seenLog.last[worker]
	due := now.Sub(s.call) >= seenEvery || (heartbeat && now.Sub(s.beat) >= seenEvery)
	if due {
		if len(e.seenLog.last) >= 10_000 {
			clear(e.seenLog.last)
		}
		s.call = now
		if heartbeat {
			s.beat = now
		}
		e.seenLog.last[worker] = s
	}
	e.seenLog.mu.Unlock()
	if !due {
		return
	}
	err := e.store.WorkerUpsert(ctx, &store.WorkerUpsertParams{ID: worker, Now: now, Heartbeat: heartbeat})
	if err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "recording a worker's call failed", "worker_id", worker, "error", err)
	}
}

// WorkerView is a worker and the tasks it holds leases on.
type WorkerView struct {
	*store.Worker
	Tasks []*domain.Task // leased, soonest expiry first
}

// maxLeasedShown bounds the leases ListWorkers reads.
const maxLeasedShown = 2000

// ListWorkers returns the workers seen within the last d, most recent first,
// each with the tasks it holds now (of the first maxLeasedShown leases).
func (e *Engine) ListWorkers(ctx context.Context, d time.Duration, limit int) ([]*WorkerView, error) {
	ws, err := e.store.WorkerList(ctx, &store.WorkerListParams{Since: e.now().Add(-d), Limit: limit})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list workers: %w", err))
	}
	// Every lease expires before the end of time: this lists them all.
	leased, err := e.store.TaskListExpired(ctx, &store.TaskListExpiredParams{Now: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Limit: maxLeasedShown})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("list leases: %w", err))
	}
	byOwner := map[string][]*domain.Task{}
	for _, t := range leased {
		byOwner[t.LeaseOwner] = append(byOwner[t.LeaseOwner], t)
	}
	out := make([]*WorkerView, len(ws))
	for i, w := range ws {
		out[i] = &WorkerView{Worker: w, Tasks: byOwner[w.ID]}
	}
	return out, nil
}

// CountFinishedTasks counts a job's completed chunks by when they finished,
// in buckets of width from start (see store.Querier.TaskCountFinished).
func (e *Engine) CountFinishedTasks(ctx context.Context, jobID string, start time.Time, width time.Duration, buckets int) ([]int, error) {
	c, err := e.store.TaskCountFinished(ctx, &store.TaskCountFinishedParams{JobID: jobID, Start: start, Width: width, Buckets: buckets})
	return c, mapStoreErr(err)
}

// CountTasks counts this shard's tasks by kind and state.
func (e *Engine) CountTasks(ctx context.Context) ([]store.TaskCount, error) {
	c, err := e.store.TaskCountByState(ctx)
	return c, mapStoreErr(err)
}

// ListTreeRoots returns the newest roots of general trees on this shard.
func (e *Engine) ListTreeRoots(ctx context.Context, limit int) ([]*domain.Task, error) {
	ts, err := e.store.TaskListRoots(ctx, limit)
	return ts, mapStoreErr(err)
}

// TreeNode is a task of a tree with the IDs of its upstreams, some of
// which may be on other shards.
type TreeNode struct {
	*domain.Task
	Upstreams []string
}

// MaxTreeShown bounds the tasks Tree returns.
const MaxTreeShown = 2000

// GetTree returns the tasks on this shard of the tree that task id belongs to
// (a job's, or a general one), by position in the tree, at most
// MaxTreeShown of them.
func (e *Engine) GetTree(ctx context.Context, id string) ([]*TreeNode, error) {
	t, err := e.store.TaskGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "task %q", id)
	}
	kinds := []domain.TaskKind{domain.KindTree}
	if t.Kind != domain.KindTree {
		kinds = []domain.TaskKind{domain.KindStitch, domain.KindChunk}
	}
	var nodes []*TreeNode
	for _, k := range kinds {
		ts, err := e.store.TaskList(ctx, &store.TaskListParams{JobID: t.JobID, Kind: k, Limit: MaxTreeShown - len(nodes), AfterIndex: -1})
		if err != nil {
			return nil, mapStoreErr(fmt.Errorf("tasks of tree %s: %w", t.JobID, err))
		}
		for _, x := range ts {
			nodes = append(nodes, &TreeNode{Task: x})
		}
	}
	byID := make(map[string]*TreeNode, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	if t.Kind == domain.KindTree {
		refs, err := e.store.TaskArgListRefs(ctx, &store.TaskArgListRefsParams{JobID: t.JobID})
		if err != nil {
			return nil, mapStoreErr(fmt.Errorf("arguments of tree %s: %w", t.JobID, err))
		}
		for _, a := range refs { // by task, then position
			if n := byID[a.TaskID]; n != nil {
				n.Upstreams = append(n.Upstreams, a.UpstreamID)
			}
		}
	} else { // a job: every chunk feeds the stitch task
		for _, n := range nodes {
			if d := byID[n.DownstreamID]; d != nil {
				d.Upstreams = append(d.Upstreams, n.ID)
			}
		}
	}
	return nodes, nil // already in order: kinds root first, each by ChunkIndex
}
