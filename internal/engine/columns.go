package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/table"
)

// A job with Columns has input columns joined to its final CSV by its
// IDColumn. Chunk outputs are stored as the workers sent them; the stitch
// joins the rows that reach the final CSV, reading only the inputs of the
// chunks they come from. Each result is checked first: an id that is not
// in its chunk's input, or that is on rows that differ in the columns,
// fails the task rather than the stitch.

// checkOutputIDs checks that every id of out, a parsed result for chunk task
// taskID of job j (which joins columns), is in the chunk's input once or
// on rows that agree on the columns. An output without the id column is
// an ErrInvalidArgument (the lease stays); an id the input does not give
// is returned as fault, for the task to fail with. A task that does not
// exist, or whose live lease (worker, attempt) does not hold, passes
// unread, for the transaction to say so: only the worker running a chunk
// can make the coordinator read its input.
func (e *Engine) checkOutputIDs(ctx context.Context, j *domain.Job, taskID, worker string, attempt int, out *table.Output) (fault, err error) {
	ids, err := out.IDs(j.IDColumn)
	if err != nil {
		return nil, fmt.Errorf("result of task %s: %w", taskID, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	t, err := e.store.TaskGet(ctx, taskID)
	if err != nil {
		if errors.Is(mapStoreErr(err), domain.ErrNotFound) {
			return nil, nil
		}
		return nil, mapStoreErr(fmt.Errorf("read task %s: %w", taskID, err))
	}
	if domain.CheckLease(t, worker, attempt, e.now()) != nil {
		return nil, nil
	}
	_, err = e.lookupColumns(ctx, j, t, ids)
	if errors.Is(err, domain.ErrInvalidArgument) {
		why := strings.TrimPrefix(err.Error(), domain.ErrInvalidArgument.Error()+": ")
		return fmt.Errorf("the output cannot be joined to the chunk's input: %s", why), nil
	}
	return nil, err
}

// lookupColumns returns the values of j's Columns for ids in the input of
// its chunk task t. Errors of the data wrap domain.ErrInvalidArgument.
func (e *Engine) lookupColumns(ctx context.Context, j *domain.Job, t *domain.Task, ids []string) (map[string][]string, error) {
	in, err := e.openChunk(ctx, j, t)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return table.LookupColumns(in, j.IDColumn, j.Columns, ids)
}

// chunkLookup is the table.LookupFunc of job j's stitch: it reads chunk
// tasks by the IDs CreateJob gives them.
func (e *Engine) chunkLookup(ctx context.Context, j *domain.Job) table.LookupFunc {
	return func(chunk int, ids []string) (map[string][]string, error) {
		id := j.ID + "-" + strconv.Itoa(chunk)
		t, err := e.store.TaskGet(ctx, id)
		if err != nil {
			return nil, mapStoreErr(fmt.Errorf("read task %s: %w", id, err))
		}
		return e.lookupColumns(ctx, j, t, ids)
	}
}

// chunkReader is the input of a chunk task cut from an upload: the job's
// header line, then the chunk's byte range of the upload's blob.
type chunkReader struct {
	io.Reader
	body io.Closer
}

// Close releases the blob.
func (r *chunkReader) Close() error { return r.body.Close() }

// openChunk opens the input of chunk task t of job j, cut from an upload.
func (e *Engine) openChunk(ctx context.Context, j *domain.Job, t *domain.Task) (*chunkReader, error) {
	if j.UploadID == "" {
		return nil, fmt.Errorf("task %s's input is hosted at %s, not on this coordinator: %w", t.ID, t.InputURI, domain.ErrNotFound)
	}
	key, err := e.uploadKey(ctx, j.UploadID)
	if err != nil {
		return nil, fmt.Errorf("upload of task %s: %w", t.ID, err)
	}
	body, err := e.cfg.Blobs.OpenRange(ctx, key, t.InputOffset, t.InputLength)
	if err != nil {
		return nil, fmt.Errorf("input of task %s: %w", t.ID, err)
	}
	return &chunkReader{Reader: io.MultiReader(bytes.NewReader(j.InputHeader), body), body: body}, nil
}
