package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// ResultPiece is how much of a final CSV a ResultStream reads from the
// store at once, and so about all of it that a download holds.
const ResultPiece = 1 << 20

// ResultStream is a completed job's final CSV, read from the store a piece
// (ResultPiece) at a time as it is read, so that a download's memory does
// not grow with the CSV. It reads with the context given to OpenJobResult:
// like an http.Request's body, it serves the one call that opened it and
// must not outlive it.
//
// The pieces are read by separate statements. A final CSV never changes
// once written, but retention may delete the job during a long download:
// the next read then fails with domain.ErrNotFound, and a transport that
// has sent its headers can only cut the response short (its
// Content-Length tells the client it is incomplete).
type ResultStream struct {
	Size   int64  // bytes
	SHA256 string // hex, of the whole CSV

	ctx   context.Context
	store store.Querier
	id    string
	off   int64  // where the next piece starts
	piece []byte // read from the store, not yet returned
}

// OpenJobResult opens a completed job's final CSV and reads its first
// piece; before the job completes, ErrNotReady. A job still being created
// does not exist yet.
func (e *Engine) OpenJobResult(ctx context.Context, id string) (*ResultStream, error) {
	j, err := e.store.JobGet(ctx, id)
	if err == nil && j.Creating {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFound(err, "job %q", id)
	}
	if j.Status != domain.JobCompleted {
		return nil, fmt.Errorf("job %s is %s; its result exists once it is completed: %w", id, j.Status, domain.ErrNotReady)
	}
	r := &ResultStream{Size: j.ResultBytes, SHA256: j.ResultSHA256, ctx: ctx, store: e.store, id: id}
	// The first piece is read now, while a transport can still answer an
	// error with a status of its own rather than an empty 200.
	if err := r.next(); err != nil && err != io.EOF {
		return nil, err
	}
	return r, nil
}

// Read implements io.Reader.
func (r *ResultStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(r.piece) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.piece)
	r.piece = r.piece[n:]
	return n, nil
}

// WriteTo writes the rest of the CSV to w a piece at a time; io.Copy uses
// it, which spares copying each piece into a buffer of its own.
func (r *ResultStream) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for {
		if len(r.piece) == 0 {
			err := r.next()
			if err == io.EOF {
				return written, nil
			}
			if err != nil {
				return written, err
			}
		}
		n, err := w.Write(r.piece)
		written += int64(n)
		r.piece = r.piece[n:]
		if err != nil {
			return written, err
		}
	}
}

// next reads the piece that starts at r.off, or returns io.EOF at Size.
func (r *ResultStream) next() error {
	if r.off >= r.Size {
		return io.EOF
	}
	limit := int(min(ResultPiece, r.Size-r.off))
	b, err := r.store.JobResultRead(r.ctx, &store.JobResultReadParams{ID: r.id, Offset: r.off, Limit: limit})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("job %s was deleted while its result was read (at byte %d of %d): %w",
			r.id, r.off, r.Size, domain.ErrNotFound)
	case err != nil:
		return mapStoreErr(fmt.Errorf("read the result of job %s at byte %d: %w", r.id, r.off, err))
	case len(b) == 0:
		return fmt.Errorf("the result of job %s ends at byte %d, before its size %d: %w",
			r.id, r.off, r.Size, io.ErrUnexpectedEOF)
	}
	r.piece = b[:min(len(b), limit)]
	r.off += int64(len(r.piece))
	return nil
}
