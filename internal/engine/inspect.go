package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads for people: the dashboard and the metrics. None of them is on a
// worker's path (the workers' own bookkeeping is in worker.go).

// CountFinishedTasks counts a job's completed chunks by when they finished,
// in buckets of width from start (see store.Querier.TaskCountFinished).
func (e *Engine) CountFinishedTasks(ctx context.Context, jobID string, start time.Time, width time.Duration, buckets int) ([]int, error) {
	if _, err := e.clientJobSettings(ctx, jobID); err != nil {
		return nil, err
	}
	c, err := e.store.TaskCountFinished(ctx, &store.TaskCountFinishedParams{JobID: jobID, Start: start, Width: width, Buckets: buckets})
	return c, mapStoreErr(err)
}

// CountTasks counts this shard's tasks by kind and state.
func (e *Engine) CountTasks(ctx context.Context) ([]store.TaskCount, error) {
	c, err := e.store.TaskCountByState(ctx)
	return c, mapStoreErr(err)
}

// ListTreeRoots returns the newest roots of general trees on this shard
// that the caller may see.
func (e *Engine) ListTreeRoots(ctx context.Context, limit int) ([]*domain.Task, error) {
	owner := ""
	if c := domain.CallerOf(ctx); !c.Admin {
		owner = c.Account
	}
	ts, err := e.store.TaskListRoots(ctx, owner, limit)
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
	t, err := clientTask(ctx, ballotReader(e.store), id)
	if err != nil {
		return nil, err
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
