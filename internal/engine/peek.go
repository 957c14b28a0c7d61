package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
)

// maxPeeks is how many partial results one coordinator merges at once;
// more wait their turn, so that clients polling a large job cannot take
// every core from the workers' requests.
const maxPeeks = 2

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
	var buf bytes.Buffer
	chunks, _, err := e.mergeOutputs(ctx, j, rows, &buf, false)
	var fault *mergeFault
	if errors.As(err, &fault) {
		return nil, fmt.Errorf("job %s: %s: %w", id, fault.Error(), domain.ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return &PartialResult{CSV: buf.Bytes(), ChunksDone: chunks, ChunksTotal: j.ChunkCount, Completed: completed}, nil
}
