package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/table"
)

// maxPeeks is how many partial results one coordinator merges at once;
// more wait their turn, so that clients polling a large job cannot take
// every core from the workers' requests.
const maxPeeks = 2

// peekJobs is how many jobs' partial merges a coordinator keeps: each
// holds the job's best top_k rows and a bit per chunk.
const peekJobs = 4

// PartialResult is a look at a job's result before it completes.
type PartialResult struct {
	// CSV is the final CSV that the chunks completed so far give: the
	// best top_k rows over them, in the final CSV's order, ties and
	// format, with its joined columns. Empty while no chunk completed;
	// nil when Completed and every row was asked for (the final CSV is
	// OpenJobResult's).
	CSV         []byte
	ChunksDone  int
	ChunksTotal int
	Completed   bool // the job is completed: its final CSV is the answer
}

// PeekJobResult merges the outputs of the chunks of job id completed so
// far, as the stitch merges them all, whatever the job's status, keeping
// the best rows of them (top_k when rows is 0 or more than top_k). For a
// completed job and all its top_k rows it merges nothing and says so
// (Completed): its final CSV is the answer. Outputs that cannot be merged
// (they would fail the stitch) are ErrConflict.
//
// The merge of a job's chunks is kept between looks (for peekJobs jobs):
// a look reads the completed chunks' outputs from the store, but parses
// only those it did not merge before. A completed chunk's output never
// changes, so what was merged stays right.
func (e *Engine) PeekJobResult(ctx context.Context, id string, rows int) (*PartialResult, error) {
	j, err := clientJob(ctx, e.store, id)
	if err != nil {
		return nil, err
	}
	if rows <= 0 || rows > j.TopK {
		rows = j.TopK
	}
	completed := j.Status == domain.JobCompleted
	if completed && rows == j.TopK {
		return &PartialResult{ChunksDone: j.ChunkCount, ChunksTotal: j.ChunkCount, Completed: true}, nil
	}
	select {
	case e.peeks <- struct{}{}:
		defer func() { <-e.peeks }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	m, chunks, err := e.peekMerge(ctx, j, rows)
	var buf bytes.Buffer
	if err == nil {
		_, err = e.finishMerge(ctx, j, m, &buf)
	}
	var fault *mergeFault
	if errors.As(err, &fault) {
		return nil, fmt.Errorf("job %s: %s: %w", id, fault.Error(), domain.ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return &PartialResult{CSV: buf.Bytes(), ChunksDone: chunks, ChunksTotal: j.ChunkCount, Completed: completed}, nil
}

// peekMerge brings job j's kept merge up to date with its completed
// chunks and returns a Merger of its best rows, and how many chunks it
// merged.
func (e *Engine) peekMerge(ctx context.Context, j *domain.Job, rows int) (*table.Merger, int, error) {
	st, err := e.peeked.get(j)
	if err != nil {
		return nil, 0, &mergeFault{err}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := e.readOutputs(ctx, j, st.p.Add); err != nil {
		e.peeked.drop(j.ID, st) // a Partial is not used after an error
		return nil, 0, err
	}
	return st.p.Merger(rows), st.p.Chunks(), nil
}

// peekCache keeps the partial merges of the jobs looked at lately.
type peekCache struct {
	mu   sync.Mutex
	jobs map[string]*peekState
}

type peekState struct {
	mu sync.Mutex // held while the merge is brought up to date
	p  *table.Partial
}

// get returns job j's kept merge, or a new one; when peekJobs are kept,
// the others are let go.
func (c *peekCache) get(j *domain.Job) (*peekState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.jobs[j.ID]; ok {
		return st, nil
	}
	p, err := table.NewPartial(j.ScoreColumn, j.Order, j.TopK)
	if err != nil {
		return nil, err
	}
	if c.jobs == nil || len(c.jobs) >= peekJobs {
		c.jobs = map[string]*peekState{}
	}
	st := &peekState{p: p}
	c.jobs[j.ID] = st
	return st, nil
}

// drop lets go of job id's merge st, if it is still the one kept.
func (c *peekCache) drop(id string, st *peekState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs[id] == st {
		delete(c.jobs, id)
	}
}
