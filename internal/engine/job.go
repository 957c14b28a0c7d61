package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// JobView is a job with its chunk tasks counted by state.
type JobView struct {
	*domain.Job
	Tasks domain.TaskCounts

	// For ProgressToken: the version of the job's stitch root, and when
	// the state of the two rows began.
	rootVersion int64
	markedAt    time.Time
}

// CreateBatch is how many chunk tasks CreateJob writes per transaction:
// small enough that SQLite's one writer is never held for long, large
// enough that a million-chunk job is written in about 10 s. On the
// project's 2-core machine a batch takes about 55 ms on SQLite and 50 ms
// on PostgreSQL when nothing else runs (a million chunks through the
// engine: 11.2 s and 10.2 s), and 75 ms and 150 ms on average during a
// creation over REST while 32 workers run another job (docs/PERFORMANCE.md,
// "Creating a job of a million chunks").
const CreateBatch = 5000

// CreationStale is how long a job's creation may make no progress before
// it counts as dead: its partial job is deleted and its Idempotency-Key
// may create the job again. Each batch renews it.
const CreationStale = 10 * time.Second

// CreateJob validates spec and creates its job, its chunk tasks and its
// stitch root. With an idempotency key, a replay of the same spec returns
// the job created first (created false), and a different spec under the
// same key is ErrConflict; while the first is still being created, a
// replay waits for it (see replay).
//
// The job appears whole or not at all: it is written hidden (Creating),
// then its chunk tasks in batches of CreateBatch, each in a short
// transaction of its own that also renews the creation, and the last one
// makes the job visible. Claims, heartbeats and results of other jobs run
// between the batches; workers may start on the chunks already written. A
// creation that dies in the middle leaves a hidden job that no client sees,
// deleted by the reaper once CreationStale has passed
// (DeleteAbandonedJobs).
func (e *Engine) CreateJob(ctx context.Context, spec *domain.JobSpec, idempotencyKey string) (view *JobView, created bool, err error) {
	if err := spec.Validate(); err != nil {
		return nil, false, err
	}
	if len(idempotencyKey) > 256 {
		return nil, false, domain.Invalidf("Idempotency-Key is %d bytes long; at most 256", len(idempotencyKey))
	}
	hash, err := specHash(spec)
	if err != nil {
		return nil, false, err
	}
	if idempotencyKey != "" {
		if v, err := e.replay(ctx, idempotencyKey, hash); !errors.Is(err, domain.ErrNotFound) {
			return v, false, err
		}
	}

	owner := domain.CallerOf(ctx).Account
	if err := checkJobQuota(ctx, e.store, owner, false); err != nil { // before the input is read
		return nil, false, mapStoreErr(err)
	}
	inputs, header, err := e.chunkInputs(ctx, spec)
	if err != nil {
		return nil, false, err
	}
	if err := checkHeaderColumns(header, spec); err != nil {
		return nil, false, err
	}
	now := e.now()
	local := e.newLocalID()
	job := &domain.Job{
		ID:             e.cfg.Shard + ":" + local,
		Name:           spec.Name,
		Owner:          owner,
		Workload:       spec.Workload,
		Parameters:     spec.Parameters,
		ChunkRows:      spec.ChunkRows,
		HasHeader:      spec.HasHeader,
		TopK:           spec.TopK,
		ScoreColumn:    spec.ScoreColumn,
		Order:          spec.Order,
		MaxAttempts:    spec.MaxAttempts,
		LeaseSeconds:   spec.LeaseSeconds,
		TimeoutSeconds: spec.TimeoutSeconds,
		Priority:       spec.Priority,
		Workers:        spec.Workers,
		Quorum:         spec.Quorum,
		NoCache:        spec.NoCache,
		SpeculateAfter: domain.DefaultSpeculateAfter,
		Columns:        spec.Columns,
		IDColumn:       spec.IDColumn,
		Status:         domain.JobPending,
		RootTaskID:     e.cfg.Shard + ":" + local + "-root",
		ChunkCount:     len(inputs),
		UploadID:       spec.UploadID,
		InputHeader:    header,
		IdempotencyKey: idempotencyKey,
		RequestHash:    hash,
		CreatedAt:      now,
		UpdatedAt:      now,
		Creating:       true,
	}
	if spec.SpeculateAfter != nil {
		job.SpeculateAfter = *spec.SpeculateAfter
	}
	if job.Cached, err = e.reuseOutputs(ctx, job, inputs); err != nil {
		return nil, false, err
	}
	root := &domain.Task{
		ID:               job.RootTaskID,
		JobID:            job.ID,
		Kind:             domain.KindStitch,
		Workload:         job.Workload,
		ChunkIndex:       -1,
		State:            domain.TaskWaiting,
		MaxAttempts:      job.MaxAttempts,
		LeaseSeconds:     job.LeaseSeconds,
		Priority:         job.Priority,
		JobCreatedAt:     now,
		Owner:            job.Owner,
		PendingUpstreams: len(inputs),
		CreatedAt:        now,
		UpdatedAt:        now,
	}
	err = e.tx(ctx, func(q store.Querier) error {
		if err := checkJobQuota(ctx, q, owner, true); err != nil {
			return err
		}
		if job.UploadID != "" {
			// Keeps retention from deleting the upload under the new job
			// (see store.RetentionQuerier.UploadTouch), or finds it gone.
			if err := q.UploadTouch(ctx, &store.UploadTouchParams{ID: job.UploadID, Now: now}); err != nil {
				return notFound(err, "upload %q", job.UploadID)
			}
		}
		if err := q.JobInsert(ctx, job); err != nil {
			return err
		}
		return q.TaskInsert(ctx, []*domain.Task{root})
	})
	if errors.Is(err, store.ErrDuplicate) && idempotencyKey != "" {
		// Another request with the same key won the race.
		v, err := e.replay(ctx, idempotencyKey, hash)
		return v, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("create job: %w", err)
	}
	e.creating.add(job.ID)
	err = e.createTasks(ctx, job, inputs)
	e.creating.remove(job.ID)
	if err != nil {
		// Best effort: the reaper deletes it anyway once it is stale.
		if derr := e.deleteAbandoned(context.WithoutCancel(ctx), job.ID, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)); derr != nil {
			e.log.WarnContext(ctx, "partial job not deleted; the reaper deletes it", "job_id", job.ID, "error", derr)
		}
		return nil, false, fmt.Errorf("create job: %w", err)
	}
	job.Creating = false
	e.log.InfoContext(ctx, "job created", "job_id", job.ID, "workload", job.Workload, "chunks", job.ChunkCount)
	v, err := e.GetJob(ctx, job.ID) // workers may have started on it already
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// createTasks writes job's chunk tasks in batches of CreateBatch, each in a
// transaction that renews the job's creation, the last one ending it. A
// job that failed meanwhile (a chunk claimed early failed for good) gets
// the rest of its tasks cancelled.
func (e *Engine) createTasks(ctx context.Context, job *domain.Job, inputs []chunkInput) error {
	batch := make([]*domain.Task, 0, min(len(inputs), CreateBatch))
	cached, stitchReady := 0, false // of the batch; all chunks done
	for start := 0; start < len(inputs); start += CreateBatch {
		end := min(start+CreateBatch, len(inputs))
		err := e.tx(ctx, func(q store.Querier) error {
			// Progress is recorded first, which on PostgreSQL locks the
			// job against the reaper, and again once the batch is in: on
			// SQLite the reaper runs after this transaction, and a batch
			// that took longer than CreationStale would look abandoned.
			now := e.now()
			if err := q.JobUpdateCreation(ctx, &store.JobUpdateCreationParams{ID: job.ID, Now: now}); err != nil {
				return fmt.Errorf("job %s was given up on while it was created (no progress for %v): %w", job.ID, CreationStale, err)
			}
			j, err := q.JobGet(ctx, job.ID)
			if err != nil {
				return err
			}
			batch = batch[:0]
			cached = 0
			for i := start; i < end; i++ {
				t := chunkTask(job, i, inputs[i], j.Status.Final(), now)
				if t.State == domain.TaskCompleted {
					cached++
				}
				batch = append(batch, t)
			}
			if err := q.TaskInsert(ctx, batch); err != nil {
				return err
			}
			if cached > 0 {
				// The chunk cache completed them: their stitch counts them
				// done, as it does a result's (the last makes it runnable).
				root, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: job.RootTaskID, N: cached, Now: now})
				if err != nil {
					return err
				}
				stitchReady = root.State == domain.TaskPending
			}
			if err := q.JobUpdateCreation(ctx, &store.JobUpdateCreationParams{ID: job.ID, Now: e.now(), Done: end == len(inputs)}); err != nil {
				return err
			}
			if end < len(inputs) {
				return nil
			}
			// The batch that makes the job visible records its creation.
			return e.audit(ctx, q, actionJobCreate, job.ID, fmt.Sprintf("workload %s, %d chunks", job.Workload, job.ChunkCount))
		})
		if err != nil {
			return err
		}
		e.notifyWork(domain.KindChunk, job.Workload, end-start-cached)
	}
	if stitchReady {
		e.stitch.Notify()
	}
	return nil
}

// chunkTask is chunk task i of job, cancelled when the job is final.
func chunkTask(job *domain.Job, i int, c chunkInput, cancelled bool, now time.Time) *domain.Task {
	t := &domain.Task{
		ID:             job.ID + "-" + strconv.Itoa(i),
		JobID:          job.ID,
		Kind:           domain.KindChunk,
		Workload:       job.Workload,
		ChunkIndex:     i,
		State:          domain.TaskPending,
		MaxAttempts:    job.MaxAttempts,
		LeaseSeconds:   job.LeaseSeconds,
		TimeoutSeconds: job.TimeoutSeconds, // the stitch root has none: it is the coordinator's
		Priority:       job.Priority,
		JobCreatedAt:   job.CreatedAt,
		Owner:          job.Owner,
		Workers:        job.Workers,
		InputURI:       c.URI,
		InputSHA256:    c.SHA256,
		InputBytes:     c.Bytes,
		InputOffset:    c.Offset,
		InputLength:    c.Length,
		DownstreamID:   job.RootTaskID,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	switch {
	case c.Cached != nil:
		t.State, t.Result, t.FinishedAt = domain.TaskCompleted, c.Cached, now
	case cancelled:
		t.State, t.FinishedAt = domain.TaskCancelled, now
	}
	return t
}

// abandonedBatch is how many tasks of an abandoned job one transaction deletes.
const abandonedBatch = 5000

// DeleteAbandonedJobs deletes the jobs whose creation died (no progress for
// CreationStale), in small transactions, and returns how many it deleted.
// The reaper runs it.
func (e *Engine) DeleteAbandonedJobs(ctx context.Context) (int, error) {
	before := e.now().Add(-CreationStale)
	jobs, err := e.store.JobListAbandoned(ctx, &store.JobListAbandonedParams{Before: before, Limit: 10})
	if err != nil {
		return 0, mapStoreErr(fmt.Errorf("list abandoned jobs: %w", err))
	}
	n := 0
	for _, j := range jobs {
		if e.creating.has(j.ID) {
			continue // alive here, its next batch waiting for the database
		}
		if err := e.deleteAbandoned(ctx, j.ID, before); err != nil {
			if errors.Is(err, domain.ErrNotFound) {
				continue // its creation went on, or another process deleted it
			}
			return n, err
		}
		e.log.InfoContext(ctx, "partial job deleted: its creation stopped", "job_id", j.ID)
		n++
	}
	return n, nil
}

// creatingJobs holds the IDs of the jobs this process is creating. Their
// creations are alive however long a batch waits for the database, which
// on SQLite's one writer may be longer than CreationStale while other
// transactions go first: the reaper here leaves them. Another process's
// reaper still judges them by their progress.
type creatingJobs struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (c *creatingJobs) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]bool{}
	}
	c.ids[id] = true
}

func (c *creatingJobs) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
}

func (c *creatingJobs) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// deleteAbandoned deletes job id, abandoned if it made no progress since
// before, batch after batch.
func (e *Engine) deleteAbandoned(ctx context.Context, id string, before time.Time) error {
	for {
		var gone bool
		err := e.tx(ctx, func(q store.Querier) (err error) {
			gone, err = q.JobDeleteAbandoned(ctx, &store.JobDeleteAbandonedParams{ID: id, Before: before, Limit: abandonedBatch})
			return err
		})
		if err != nil {
			return fmt.Errorf("delete abandoned job %s: %w", id, err)
		}
		if gone {
			return nil
		}
	}
}

// chunkInput is where one chunk task's input comes from.
type chunkInput struct {
	URI, SHA256           string
	Bytes, Offset, Length int64
	Cached                []byte // the output the chunk cache gives it; nil to run it
}

// chunkInputs lists the chunks of spec: the hosted ones as given, or those
// cut from its upload, with the header line they repeat.
func (e *Engine) chunkInputs(ctx context.Context, spec *domain.JobSpec) ([]chunkInput, []byte, error) {
	if spec.UploadID == "" {
		out := make([]chunkInput, len(spec.Chunks))
		for i, c := range spec.Chunks {
			out[i] = chunkInput{URI: c.URI, SHA256: c.SHA256, Bytes: c.Bytes}
		}
		return out, nil, nil
	}
	c, err := e.splitUpload(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	out := make([]chunkInput, len(c.Chunks))
	for i, ch := range c.Chunks {
		out[i] = chunkInput{
			SHA256: hex.EncodeToString(ch.SHA256[:]),
			Bytes:  int64(len(c.Header)) + ch.Length,
			Offset: ch.Offset, Length: ch.Length,
		}
	}
	return out, c.Header, nil
}

// checkHeaderColumns checks that the header line of an upload names the
// columns spec joins, and its id column; a job that joins none, or cut
// from hosted chunks (which Validate refuses to join), passes.
func checkHeaderColumns(header []byte, spec *domain.JobSpec) error {
	if len(spec.Columns) == 0 || header == nil {
		return nil
	}
	names, err := csv.NewReader(bytes.NewReader(header)).Read()
	if err != nil {
		return fmt.Errorf("read the header line of upload %s: %w", spec.UploadID, err)
	}
	for _, c := range append([]string{spec.IDColumn}, spec.Columns...) {
		if !slices.Contains(names, c) {
			return domain.Invalidf("the upload's header has no column %q; it has %s", c, strings.Join(names, ", "))
		}
	}
	return nil
}

// replay returns the job created under key when hash matches its request.
// While another request is still creating that job, it waits for the
// creation to end: a live creation renews itself batch by batch, so the
// wait ends with the whole job, or with a stale creation, which it deletes
// so that the caller creates the job anew.
func (e *Engine) replay(ctx context.Context, key, hash string) (*JobView, error) {
	for {
		j, err := e.store.JobGetByIdempotencyKey(ctx, domain.CallerOf(ctx).Account, key)
		if err != nil {
			return nil, mapStoreErr(err)
		}
		if j.RequestHash != hash {
			return nil, fmt.Errorf("Idempotency-Key %q was used for job %s with a different request; use a new key: %w", key, j.ID, domain.ErrConflict)
		}
		if !j.Creating {
			return e.view(ctx, j)
		}
		before := e.now().Add(-CreationStale)
		if j.UpdatedAt.Before(before) || j.Status == domain.JobCancelled {
			// Its creation died: delete what it wrote and create it anew.
			if err := e.deleteAbandoned(ctx, j.ID, before); err != nil && !errors.Is(err, domain.ErrNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("job of Idempotency-Key %q: its creation died: %w", key, domain.ErrNotFound)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// specHash identifies a job request by its meaning: the same spec with
// other whitespace in its parameters hashes the same.
func specHash(spec *domain.JobSpec) (string, error) {
	var params bytes.Buffer
	if err := json.Compact(&params, spec.Parameters); err != nil {
		return "", domain.Invalidf("parameters must be a JSON object: %v", err)
	}
	s := *spec
	s.Parameters = params.Bytes()
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("hash job request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func (e *Engine) view(ctx context.Context, j *domain.Job) (*JobView, error) {
	v, err := e.views(ctx, []*domain.Job{j})
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// views returns jobs with their progress, counted in one go. The roots'
// versions, for the progress tokens, are read after the jobs and before
// the counts: a token is never newer than what its view shows, so a
// client that waits on it misses no change (one it has seen at worst
// answers its next wait at once).
func (e *Engine) views(ctx context.Context, jobs []*domain.Job) ([]*JobView, error) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	markers, err := e.store.JobListMarkers(ctx, ids)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("read the roots of %d jobs: %w", len(ids), err))
	}
	counts, err := e.store.TaskCountByJob(ctx, ids)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("count tasks of %d jobs: %w", len(ids), err))
	}
	out := make([]*JobView, len(jobs))
	for i, j := range jobs {
		m := markers[j.ID]
		at := j.UpdatedAt
		if m.UpdatedAt.After(at) {
			at = m.UpdatedAt
		}
		out[i] = &JobView{Job: j, Tasks: counts[j.ID], rootVersion: m.RootVersion, markedAt: at}
		out[i].Tasks.Cached = j.Cached
	}
	return out, nil
}

// GetJob returns a job with its progress.
func (e *Engine) GetJob(ctx context.Context, id string) (*JobView, error) {
	j, err := clientJob(ctx, e.store, id)
	if err != nil {
		return nil, err
	}
	return e.view(ctx, j)
}

// ListJobsParams selects a page of jobs.
type ListJobsParams struct {
	Owner  string           // the account whose jobs to list; empty for the caller's (an admin's: everyone's)
	Status domain.JobStatus // empty for any
	Limit  int              // 1-1000; 0 means 50
	Cursor string           // from a previous page's next cursor
}

// ListJobs returns jobs newest first and the cursor of the next page ("" at the end).
func (e *Engine) ListJobs(ctx context.Context, p ListJobsParams) ([]*JobView, string, error) {
	if p.Status != "" && !p.Status.Valid() {
		return nil, "", domain.Invalidf("status %q is not one of pending, running, completed, failed, cancelled", p.Status)
	}
	limit, err := pageLimit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	lp := &store.JobListParams{Owner: p.Owner, Status: p.Status, Limit: limit + 1}
	if c := domain.CallerOf(ctx); !c.Admin {
		if p.Owner != "" && p.Owner != c.Account {
			return nil, "", nil // another account's jobs: none it may see
		}
		lp.Owner = c.Account
	}
	if p.Cursor != "" {
		c, err := decodeJobCursor(p.Cursor)
		if err != nil {
			return nil, "", err
		}
		lp.After = c
	}
	jobs, err := e.store.JobList(ctx, lp)
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("list jobs: %w", err))
	}
	next := ""
	if len(jobs) > limit {
		jobs = jobs[:limit]
		last := jobs[limit-1]
		next = encodeCursor(strconv.FormatInt(last.CreatedAt.UnixMicro(), 10) + "|" + last.ID)
	}
	views, err := e.views(ctx, jobs)
	if err != nil {
		return nil, "", err
	}
	return views, next, nil
}

func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return 50, nil
	case n < 1 || n > 1000:
		return 0, domain.Invalidf("limit is %d; it must be between 1 and 1000", n)
	}
	return n, nil
}

func encodeCursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", domain.Invalidf("cursor %q is not one this server handed out; pass next_cursor from the previous page", c)
	}
	return string(b), nil
}

func decodeJobCursor(c string) (*store.JobCursor, error) {
	s, err := decodeCursor(c)
	if err != nil {
		return nil, err
	}
	micros, id, ok := strings.Cut(s, "|")
	us, perr := strconv.ParseInt(micros, 10, 64)
	if !ok || perr != nil || id == "" || strings.ContainsRune(id, 0) {
		return nil, domain.Invalidf("cursor %q is not one this server handed out; pass next_cursor from the previous page", c)
	}
	return &store.JobCursor{CreatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}

// CancelJob cancels a job and every task of it not yet final. Cancelling a
// job that is already final changes nothing and returns it as it is.
func (e *Engine) CancelJob(ctx context.Context, id string) (*JobView, error) {
	var job *domain.Job
	err := e.tx(ctx, func(q store.Querier) error {
		j, err := clientJob(ctx, q, id)
		if err != nil {
			return err
		}
		job = j
		if j.Status.Final() {
			return nil
		}
		now := e.now()
		domain.FinishJob(j, domain.JobCancelled, "", now)
		if err := q.JobUpdate(ctx, j); err != nil {
			return err
		}
		if err := cancelJobTasks(ctx, q, domain.KindChunk, &store.TaskCancelJobParams{JobID: j.ID, Now: now}); err != nil {
			return err
		}
		return e.audit(ctx, q, actionJobCancel, j.ID, "")
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	e.jobEnded(id)
	e.log.InfoContext(ctx, "job cancel", "job_id", id, "status", job.Status)
	return e.view(ctx, job)
}

// RetryJob runs a failed or cancelled job's unfinished chunks again: its
// failed and cancelled chunk tasks go back to pending with a fresh budget
// of the job's max_attempts, its completed chunks keep their outputs, its
// stitch root waits for the chunks again, and the job is pending. A job
// that is pending, running or completed is ErrConflict.
func (e *Engine) RetryJob(ctx context.Context, id string) (*JobView, error) {
	var (
		job     *domain.Job
		moved   int
		rootRdy bool
	)
	err := e.tx(ctx, func(q store.Querier) error {
		moved, rootRdy = 0, false
		j, err := clientJob(ctx, q, id)
		if err != nil {
			return err
		}
		job = j
		now := e.now()
		if err := domain.RetryJob(j, now); err != nil {
			return err
		}
		if err := q.JobUpdate(ctx, j); err != nil {
			return err
		}
		if moved, err = q.TaskRetryJob(ctx, &store.TaskRetryJobParams{JobID: j.ID, MaxAttempts: j.MaxAttempts, Now: now}); err != nil {
			return err
		}
		counts, err := q.TaskCountByJob(ctx, []string{j.ID})
		if err != nil {
			return err
		}
		c := counts[j.ID]
		root, err := q.TaskGet(ctx, j.RootTaskID)
		if err != nil {
			return fmt.Errorf("stitch task of job %s: %w", j.ID, err)
		}
		domain.ReopenRoot(root, c.Total-c.Completed, j.MaxAttempts, now)
		rootRdy = root.State == domain.TaskPending
		if err := q.TaskUpdate(ctx, root); err != nil {
			return err
		}
		return e.audit(ctx, q, actionJobRetry, j.ID, fmt.Sprintf("%d chunks to run again", moved))
	})
	if err != nil {
		return nil, fmt.Errorf("retry job %s: %w", id, err)
	}
	if moved > 0 {
		e.notifyWork(domain.KindChunk, job.Workload, moved) // after the commit, so that woken claimers see the tasks
	}
	if rootRdy {
		e.stitch.Notify()
	}
	e.log.InfoContext(ctx, "job retry", "job_id", id, "chunks", moved)
	job.Result = nil
	return e.view(ctx, job)
}
