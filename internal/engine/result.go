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
// not grow with the CSV. It is an io.ReadSeeker, for http.ServeContent
// (ranges, HEAD, conditional requests). It reads with the context given
// to OpenJobResult: like an http.Request's body, it serves the one call
// that opened it and must not outlive it.
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
	pos   int64  // where the next Read starts
	at    int64  // where piece starts
	piece []byte // read from the store
}

// OpenJobResult opens a completed job's final CSV and reads its first
// piece; before the job completes, ErrNotReady. A job still being created
// does not exist yet.
func (e *Engine) OpenJobResult(ctx context.Context, id string) (*ResultStream, error) {
	j, err := clientJob(ctx, e.store, id)
	if err != nil {
		return nil, err
	}
	if j.Status != domain.JobCompleted {
		return nil, fmt.Errorf("job %s is %s; its result exists once it is completed: %w", id, j.Status, domain.ErrNotReady)
	}
	r := &ResultStream{Size: j.ResultBytes, SHA256: j.ResultSHA256, ctx: ctx, store: e.store, id: id}
	// The first piece is read now, while a transport can still answer an
	// error with a status of its own rather than an empty 200.
	if r.Size > 0 {
		if err := r.load(0); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Read implements io.Reader.
func (r *ResultStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.pos >= r.Size {
		return 0, io.EOF
	}
	if r.pos < r.at || r.pos >= r.at+int64(len(r.piece)) {
		if err := r.load(r.pos); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.piece[r.pos-r.at:])
	r.pos += int64(n)
	return n, nil
}

// Seek implements io.Seeker; it reads nothing, the next Read does.
func (r *ResultStream) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.Size
	default:
		return 0, fmt.Errorf("seek the result of job %s: whence %d", r.id, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("seek the result of job %s to %d, before its start", r.id, offset)
	}
	r.pos = offset
	return offset, nil
}

// load reads the piece that starts at at.
func (r *ResultStream) load(at int64) error {
	limit := int(min(ResultPiece, r.Size-at))
	b, err := r.store.JobResultRead(r.ctx, &store.JobResultReadParams{ID: r.id, Offset: at, Limit: limit})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("job %s was deleted while its result was read (at byte %d of %d): %w",
			r.id, at, r.Size, domain.ErrNotFound)
	case err != nil:
		return mapStoreErr(fmt.Errorf("read the result of job %s at byte %d: %w", r.id, at, err))
	case len(b) == 0:
		return fmt.Errorf("the result of job %s ends at byte %d, before its size %d: %w",
			r.id, at, r.Size, io.ErrUnexpectedEOF)
	}
	r.at, r.piece = at, b[:min(len(b), limit)]
	return nil
}
