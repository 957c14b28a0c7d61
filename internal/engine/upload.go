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

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// Upload streams a CSV table from r to disk — checked, normalized and
// hashed as it goes, never held in memory — and records it. A malformed
// table is ErrInvalidArgument naming the line where the bad record starts;
// nothing is recorded then.
func (e *Engine) Upload(ctx context.Context, r io.Reader) (*domain.Upload, error) {
	if e.cfg.Blobs == nil {
		return nil, errors.New("upload: this coordinator has no data directory")
	}
	w, err := e.cfg.Blobs.Create()
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	raw := &countingHash{h: sha256.New()}
	stats, err := table.Normalize(w, io.TeeReader(r, raw))
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	key, size, err := w.Commit()
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	now := e.now()
	u := &domain.Upload{
		ID:        e.cfg.Shard + ":u" + e.newLocalID(),
		SHA256:    hex.EncodeToString(raw.h.Sum(nil)),
		Bytes:     raw.n,
		Rows:      stats.Rows,
		BlobKey:   key,
		BlobBytes: size,
		CreatedAt: now,
	}
	if err := e.tx(ctx, func(q store.Querier) error { return q.UploadInsert(ctx, u) }); err != nil {
		return nil, fmt.Errorf("record upload: %w", err)
	}
	e.log.InfoContext(ctx, "upload stored", "upload_id", u.ID, "bytes", u.Bytes, "rows", u.Rows)
	return u, nil
}

// countingHash hashes and counts what is written to it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
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
