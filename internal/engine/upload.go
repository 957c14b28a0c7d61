package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// CreateUpload streams a CSV table from r to disk — checked, normalized and
// hashed as it goes, never held in memory — and records it. A malformed
// table is ErrInvalidArgument naming the line where the bad record starts;
// nothing is recorded then.
func (e *Engine) CreateUpload(ctx context.Context, r io.Reader) (*domain.Upload, error) {
	if e.cfg.Blobs == nil {
		return nil, errors.New("upload: this coordinator has no data directory")
	}
	w, err := e.cfg.Blobs.Create()
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	raw := newPipelinedHash()
	defer raw.Close()
	stats, err := table.Normalize(w, io.TeeReader(r, raw))
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	local := e.newLocalID()
	key := "u-" + local
	size, err := w.Commit(key)
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	sum, n := raw.Sum()
	u := &domain.Upload{
		ID:        e.cfg.Shard + ":u" + local,
		SHA256:    hex.EncodeToString(sum),
		Bytes:     n,
		Rows:      stats.Rows,
		BlobKey:   key,
		BlobBytes: size,
		CreatedAt: e.now(),
	}
	if err := e.tx(ctx, func(q store.Querier) error { return q.UploadInsert(ctx, u) }); err != nil {
		return nil, fmt.Errorf("record upload: %w", err)
	}
	e.log.InfoContext(ctx, "upload stored", "upload_id", u.ID, "bytes", u.Bytes, "rows", u.Rows)
	return u, nil
}

// pipelinedHash hashes what is written to it on a goroutine of its own, so
// that hashing a stream overlaps with the work the stream feeds. Writes
// copy their bytes; Sum waits for the hashing to catch up.
type pipelinedHash struct {
	ch   chan []byte
	done chan struct{}
	pool sync.Pool
	h    hash.Hash
	n    int64
	once sync.Once
}

func newPipelinedHash() *pipelinedHash {
	p := &pipelinedHash{ch: make(chan []byte, 8), done: make(chan struct{}), h: sha256.New()}
	go func() {
		defer close(p.done)
		for b := range p.ch {
			p.h.Write(b)
			p.pool.Put(&b)
		}
	}()
	return p
}

func (p *pipelinedHash) Write(b []byte) (int, error) {
	var buf []byte
	if v, ok := p.pool.Get().(*[]byte); ok && cap(*v) >= len(b) {
		buf = (*v)[:len(b)]
	} else {
		buf = make([]byte, len(b), max(len(b), 256<<10))
	}
	copy(buf, b)
	p.n += int64(len(b))
	p.ch <- buf
	return len(b), nil
}

// Sum waits for every write to be hashed and returns the hash and the
// number of bytes written. Nothing may be written after it.
func (p *pipelinedHash) Sum() ([]byte, int64) {
	p.Close()
	return p.h.Sum(nil), p.n
}

// Close ends the hashing goroutine; it is safe to call more than once.
func (p *pipelinedHash) Close() {
	p.once.Do(func() { close(p.ch) })
	<-p.done
}

// splitUpload cuts the upload named in spec into chunks of spec.ChunkRows
// records and returns the header line they repeat.
func (e *Engine) splitUpload(ctx context.Context, spec *domain.JobSpec) (*table.Chunking, error) {
	u, err := e.store.UploadGet(ctx, spec.UploadID)
	if err != nil {
		return nil, notFound(err, "upload %q", spec.UploadID)
	}
	if e.cfg.Blobs == nil {
		return nil, errors.New("split upload: this coordinator has no data directory")
	}
	f, err := e.cfg.Blobs.Open(u.BlobKey)
	if err != nil {
		return nil, fmt.Errorf("upload %s: its file is missing from the data directory: %w", u.ID, err)
	}
	defer f.Close()
	c, err := table.Split(f, spec.HasHeader, spec.ChunkRows)
	if err != nil {
		return nil, fmt.Errorf("split upload %s: %w", u.ID, err)
	}
	return c, nil
}

// TaskInput is what a worker downloads for a chunk task of an upload: the
// header line, then the chunk's byte range of the normalized upload.
type TaskInput struct {
	io.Reader
	Size   int64
	SHA256 string
	file   *os.File
}

// Close releases the input's file.
func (in *TaskInput) Close() error { return in.file.Close() }

// OpenTaskInput opens the input of a chunk task cut from an upload. A task
// whose input is hosted elsewhere is ErrNotFound, naming where it is.
func (e *Engine) OpenTaskInput(ctx context.Context, taskID string) (*TaskInput, error) {
	t, err := e.store.TaskGet(ctx, taskID)
	if err != nil {
		return nil, notFound(err, "task %q", taskID)
	}
	if t.Kind != domain.KindChunk {
		return nil, fmt.Errorf("task %s has no input to download: %w", taskID, domain.ErrNotFound)
	}
	j, err := e.jobSettings(ctx, t.JobID)
	if err != nil {
		return nil, err
	}
	if j.UploadID == "" {
		return nil, fmt.Errorf("task %s's input is hosted at %s, not on this coordinator: %w", taskID, t.InputURI, domain.ErrNotFound)
	}
	u, err := e.store.UploadGet(ctx, j.UploadID)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("upload of task %s: %w", taskID, err))
	}
	f, err := e.cfg.Blobs.Open(u.BlobKey)
	if err != nil {
		return nil, fmt.Errorf("input of task %s: %w", taskID, err)
	}
	return &TaskInput{
		Reader: io.MultiReader(bytes.NewReader(j.InputHeader), io.NewSectionReader(f, t.InputOffset, t.InputLength)),
		Size:   int64(len(j.InputHeader)) + t.InputLength,
		SHA256: t.InputSHA256,
		file:   f,
	}, nil
}
