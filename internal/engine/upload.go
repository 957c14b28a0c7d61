package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// CreateUpload streams a CSV table from r into the blob store — checked,
// normalized and hashed as it goes, never held in memory — and records it. A malformed
// table is ErrInvalidArgument naming the line where the bad record starts;
// nothing is recorded then.
//
// The upload's row is written before its blob is committed, and deleted
// again if the commit fails: so no sweep of blobs that no row names can
// find the blob unnamed. (An S3 object's time is when its multipart upload
// began, so one that took longer than the orphan age would otherwise look
// like an old orphan in the moment between the two.) A crash between them
// leaves a row of a blob that never came, under an ID no one was given,
// which upload retention deletes.
//
// A blob store bound to another database (see CheckBlobStore) takes no
// upload: once the table is read, the upload is refused and its blob
// discarded.
//
// An upload that would take its account past its max_storage is
// ErrQuotaExceeded, and nothing of it is kept: refused before a byte is
// read when its declared size (-1: not declared) is too large, else cut
// off as it crosses the quota, else refused once read, when the account's
// other uploads took the room meanwhile (see quota.go).
func (e *Engine) CreateUpload(ctx context.Context, r io.Reader, declared int64) (*domain.Upload, error) {
	if e.cfg.Blobs == nil {
		return nil, errors.New("upload: this coordinator has no blob store")
	}
	owner := domain.CallerOf(ctx).Account
	use, err := storageOf(ctx, e.store, owner, false)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("upload: %w", err))
	}
	if left := use.left(); left >= 0 {
		if declared > left {
			return nil, fmt.Errorf("upload: %w", use.refuse(tooBig(declared)))
		}
		r = &quotaReader{r: r, use: use, left: left}
	}
	local := e.newLocalID()
	key := "u-" + local
	w, err := e.cfg.Blobs.Create(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	defer w.Abort()
	raw := newPipelinedHash()
	defer raw.Close()
	stats, err := table.Normalize(w, io.TeeReader(r, raw))
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	// Only now, so that a bad table binds no store: into another
	// database's store, the blob would be swept as that one's orphan.
	if err := e.blobStoreOurs(ctx); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	sum, n := raw.Sum()
	u := &domain.Upload{
		ID:        e.cfg.Shard + ":u" + local,
		SHA256:    hex.EncodeToString(sum),
		Bytes:     n,
		Rows:      stats.Rows,
		BlobKey:   key,
		BlobBytes: stats.Bytes,
		Owner:     owner,
		CreatedAt: e.now(),
	}
	err = e.tx(ctx, func(q store.Querier) error {
		use, err := storageOf(ctx, q, owner, true)
		if err != nil {
			return err
		}
		if left := use.left(); left >= 0 && u.Bytes > left {
			return use.refuse(tooBig(u.Bytes))
		}
		if err := q.UploadInsert(ctx, u); err != nil {
			return err
		}
		return e.audit(ctx, q, actionUploadCreate, u.ID, fmt.Sprintf("%d bytes, %d rows", u.Bytes, u.Rows))
	})
	if err != nil {
		return nil, fmt.Errorf("record upload: %w", err)
	}
	if _, err := w.Commit(); err != nil {
		// Without its blob the row is of no use; should this delete
		// fail, upload retention deletes it later.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = e.tx(delCtx, func(q store.Querier) error {
			ok, err := q.UploadDelete(delCtx, &store.UploadDeleteParams{ID: u.ID, Before: e.now().Add(time.Hour)})
			if err != nil || !ok {
				return err
			}
			return e.audit(delCtx, q, actionUploadDelete, u.ID, "its file could not be stored")
		})
		return nil, fmt.Errorf("upload: %w", err)
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
	if err == nil && hidden(ctx, u.Owner) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFound(err, "upload %q", spec.UploadID)
	}
	if e.cfg.Blobs == nil {
		return nil, errors.New("split upload: this coordinator has no blob store")
	}
	f, err := e.cfg.Blobs.OpenRange(ctx, u.BlobKey, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("upload %s: read its table from %s: %w", u.ID, e.cfg.Blobs, err)
	}
	defer f.Close()
	c, err := table.Split(f, spec.HasHeader, spec.ChunkRows)
	if err != nil {
		return nil, fmt.Errorf("split upload %s: %w", u.ID, err)
	}
	return c, nil
}

// TaskInputInfo is what a chunk task's input is, without its bytes.
type TaskInputInfo struct {
	Size   int64
	SHA256 string
}

// TaskInput is what a worker downloads for a chunk task of an upload: the
// header line, then the chunk's byte range of the normalized upload.
type TaskInput struct {
	TaskInputInfo
	r    io.Reader
	body io.Closer
	n    int64 // bytes read
	e    *Engine
}

// Read reads the input.
func (in *TaskInput) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	in.n += int64(n)
	return n, err
}

// Close releases the input's blob and tells an InputObserver how many of
// its bytes were read.
func (in *TaskInput) Close() error {
	if o, ok := in.e.cfg.Observer.(InputObserver); ok && in.n > 0 {
		o.InputServed(in.n)
		in.n = 0
	}
	return in.body.Close()
}

// InputObserver is told of the chunk bytes this coordinator served to
// workers (OpenTaskInput), for metrics: with presigned inputs it sees
// none. An Observer that also implements it is told.
type InputObserver interface {
	InputServed(bytes int64)
}

// OpenTaskInput opens the input of a chunk task cut from an upload. A task
// whose input is hosted elsewhere is ErrNotFound, naming where it is.
func (e *Engine) OpenTaskInput(ctx context.Context, taskID string) (*TaskInput, error) {
	t, j, err := e.taskInput(ctx, taskID)
	if err != nil {
		return nil, err
	}
	in, err := e.openChunk(ctx, j, t)
	if err != nil {
		return nil, err
	}
	return &TaskInput{TaskInputInfo: taskInputInfo(t, j), r: in, body: in, e: e}, nil
}

// StatTaskInput is what OpenTaskInput would open, from the task's record
// alone (for a HEAD): the blob store is not read.
func (e *Engine) StatTaskInput(ctx context.Context, taskID string) (TaskInputInfo, error) {
	t, j, err := e.taskInput(ctx, taskID)
	if err != nil {
		return TaskInputInfo{}, err
	}
	return taskInputInfo(t, j), nil
}

// taskInput returns the chunk task taskID, cut from an upload, and its
// job's settings.
func (e *Engine) taskInput(ctx context.Context, taskID string) (*domain.Task, *domain.Job, error) {
	t, err := ballotReader(e.store).TaskGet(ctx, taskID)
	if err == nil && !domain.PrincipalOf(ctx).Holds(t) {
		err = store.ErrNotFound // a worker key's workers read what they hold alone
	}
	if err != nil {
		return nil, nil, notFound(err, "task %q", taskID)
	}
	if !t.Kind.ScoresRows() {
		return nil, nil, fmt.Errorf("task %s has no input to download: %w", taskID, domain.ErrNotFound)
	}
	j, err := e.jobSettings(ctx, t.JobID)
	if err != nil {
		return nil, nil, err
	}
	if j.UploadID == "" {
		return nil, nil, fmt.Errorf("task %s's input is hosted at %s, not on this coordinator: %w", taskID, t.InputURI, domain.ErrNotFound)
	}
	return t, j, nil
}

// taskInputInfo is what the input of chunk task t of job j is: its
// header line, then its byte range.
func taskInputInfo(t *domain.Task, j *domain.Job) TaskInputInfo {
	return TaskInputInfo{Size: int64(len(j.InputHeader)) + t.InputLength, SHA256: t.InputSHA256}
}

// uploadKey returns the blob name of the upload id.
func (e *Engine) uploadKey(ctx context.Context, id string) (string, error) {
	e.jobsMu.Lock()
	k, ok := e.uploadKeys[id]
	e.jobsMu.Unlock()
	if ok {
		return k, nil
	}
	u, err := e.store.UploadGet(ctx, id)
	if err != nil {
		return "", mapStoreErr(err)
	}
	e.jobsMu.Lock()
	if len(e.uploadKeys) >= maxCached {
		clear(e.uploadKeys)
	}
	e.uploadKeys[id] = u.BlobKey
	e.jobsMu.Unlock()
	return u.BlobKey, nil
}

// SignedInput is a chunk of an upload read straight from the blob store:
// GET URL with the header Range (which the signature covers), and put
// Header, the job's header line, before the bytes it returns. The task's
// InputSHA256 and InputBytes are those of the whole, Header included.
type SignedInput struct {
	URL    string
	Range  string
	Header []byte
}

// presignMin is the shortest time a signed input URL is valid for; it is
// valid as long as the lease it was handed out with, if longer.
const presignMin = 5 * time.Minute

// presign sets v.Input for a claimed chunk of an upload when the engine
// presigns and its store can. When signing fails, the worker is sent
// through the coordinator as without presigning, and the failure logged.
func (e *Engine) presign(ctx context.Context, v *TaskView) {
	ps, ok := e.cfg.Blobs.(blob.Presigner)
	if !e.cfg.Presign || !ok || !v.Kind.ScoresRows() || v.InputURI != "" || v.Job == nil || v.Job.UploadID == "" || v.InputLength <= 0 {
		return
	}
	if !utf8.Valid(v.Job.InputHeader) {
		// The header line travels in the claim's JSON, which cannot
		// carry other bytes as they are: such a chunk goes through the
		// coordinator, which serves its bytes unchanged.
		return
	}
	key, err := e.uploadKey(ctx, v.Job.UploadID)
	if err == nil {
		var sr *blob.SignedRange
		expiry := max(v.LeaseExpiresAt.Sub(e.now()), presignMin)
		if sr, err = ps.PresignRange(ctx, key, v.InputOffset, v.InputLength, expiry); err == nil {
			v.Input = &SignedInput{URL: sr.URL, Range: sr.Range, Header: v.Job.InputHeader}
			return
		}
	}
	e.log.WarnContext(ctx, "cannot presign a chunk's input; the worker reads it through the coordinator", "task_id", v.ID, "error", err)
}
