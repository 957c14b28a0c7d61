package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// JobView is a job with its chunk tasks counted by state.
type JobView struct {
	*domain.Job
	Tasks domain.TaskCounts
}

// CreateJob validates spec and creates its job, its chunk tasks and its
// stitch root in one transaction. With an idempotency key, a replay of the
// same spec returns the job created first (created false), and a different
// spec under the same key is ErrConflict.
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

	inputs, header, err := e.chunkInputs(ctx, spec)
	if err != nil {
		return nil, false, err
	}
	now := e.now()
	local := e.newLocalID()
	job := &domain.Job{
		ID:             e.cfg.Shard + ":" + local,
		Name:           spec.Name,
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
		Status:         domain.JobPending,
		RootTaskID:     e.cfg.Shard + ":" + local + "-root",
		ChunkCount:     len(inputs),
		UploadID:       spec.UploadID,
		InputHeader:    header,
		IdempotencyKey: idempotencyKey,
		RequestHash:    hash,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	tasks := make([]*domain.Task, 0, len(inputs)+1)
	tasks = append(tasks, &domain.Task{
		ID:               job.RootTaskID,
		JobID:            job.ID,
		Kind:             domain.KindStitch,
		Workload:         job.Workload,
		ChunkIndex:       -1,
		State:            domain.TaskWaiting,
		MaxAttempts:      job.MaxAttempts,
		LeaseSeconds:     job.LeaseSeconds,
		RunAfter:         now,
		Priority:         job.Priority,
		JobCreatedAt:     now,
		PendingUpstreams: len(inputs),
		CreatedAt:        now,
		UpdatedAt:        now,
	})
	for i, c := range inputs {
		tasks = append(tasks, &domain.Task{
			ID:             job.ID + "-" + strconv.Itoa(i),
			JobID:          job.ID,
			Kind:           domain.KindChunk,
			Workload:       job.Workload,
			ChunkIndex:     i,
			State:          domain.TaskPending,
			MaxAttempts:    job.MaxAttempts,
			LeaseSeconds:   job.LeaseSeconds,
			TimeoutSeconds: job.TimeoutSeconds, // the stitch root has none: it is the coordinator's
			RunAfter:       now,
			Priority:       job.Priority,
			JobCreatedAt:   now,
			InputURI:       c.URI,
			InputSHA256:    c.SHA256,
			InputBytes:     c.Bytes,
			InputOffset:    c.Offset,
			InputLength:    c.Length,
			DownstreamID:   job.RootTaskID,
			CreatedAt:      now,
			UpdatedAt:      now,
		})
	}
	err = e.tx(ctx, func(q store.Querier) error {
		if err := q.JobInsert(ctx, job); err != nil {
			return err
		}
		return q.TaskInsert(ctx, tasks)
	})
	if errors.Is(err, store.ErrDuplicate) && idempotencyKey != "" {
		// Another request with the same key won the race.
		v, err := e.replay(ctx, idempotencyKey, hash)
		return v, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("create job: %w", err)
	}
	e.log.InfoContext(ctx, "job created", "job_id", job.ID, "workload", job.Workload, "chunks", job.ChunkCount)
	e.notifyWork(domain.KindChunk, job.Workload, len(inputs))
	counts := domain.TaskCounts{}
	counts.Add(domain.TaskPending, len(inputs))
	return &JobView{Job: job, Tasks: counts}, true, nil
}

// chunkInput is where one chunk task's input comes from.
type chunkInput struct {
	URI, SHA256           string
	Bytes, Offset, Length int64
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

// replay returns the job created under key when hash matches its request.
func (e *Engine) replay(ctx context.Context, key, hash string) (*JobView, error) {
	j, err := e.store.JobGetByIdempotencyKey(ctx, key)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	if j.RequestHash != hash {
		return nil, fmt.Errorf("Idempotency-Key %q was used for job %s with a different request; use a new key: %w", key, j.ID, domain.ErrConflict)
	}
	return e.view(ctx, j)
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

// views returns jobs with their progress, counted in one go.
func (e *Engine) views(ctx context.Context, jobs []*domain.Job) ([]*JobView, error) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	counts, err := e.store.JobTaskCounts(ctx, ids)
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("count tasks of %d jobs: %w", len(ids), err))
	}
	out := make([]*JobView, len(jobs))
	for i, j := range jobs {
		out[i] = &JobView{Job: j, Tasks: counts[j.ID]}
	}
	return out, nil
}

// GetJob returns a job with its progress.
func (e *Engine) GetJob(ctx context.Context, id string) (*JobView, error) {
	j, err := e.store.JobGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "job %q", id)
	}
	return e.view(ctx, j)
}

// notFound words a store.ErrNotFound for people.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s does not exist: %w", fmt.Sprintf(format, args...), domain.ErrNotFound)
	}
	return mapStoreErr(err)
}

// ListJobsParams selects a page of jobs.
type ListJobsParams struct {
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
	lp := &store.JobListParams{Status: p.Status, Limit: limit + 1}
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
	for _, j := range jobs {
		j.Result = nil
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

// ListTasksParams selects a page of a job's chunk tasks.
type ListTasksParams struct {
	JobID  string
	State  domain.TaskState // empty for any
	Limit  int              // 1-1000; 0 means 50
	Cursor string
}

// ListTasks returns a job's chunk tasks by chunk index and the next page's cursor.
func (e *Engine) ListTasks(ctx context.Context, p ListTasksParams) ([]*TaskView, string, error) {
	if p.State != "" && !p.State.Valid() {
		return nil, "", domain.Invalidf("state %q is not one of waiting, pending, leased, completed, failed, cancelled", p.State)
	}
	limit, err := pageLimit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	after := -1
	if p.Cursor != "" {
		s, err := decodeCursor(p.Cursor)
		if err != nil {
			return nil, "", err
		}
		if after, err = strconv.Atoi(s); err != nil || after < 0 {
			return nil, "", domain.Invalidf("cursor %q is not one this server handed out; pass next_cursor from the previous page", p.Cursor)
		}
	}
	job, err := e.jobSettings(ctx, p.JobID)
	if err != nil {
		return nil, "", notFound(err, "job %q", p.JobID)
	}
	tasks, err := e.store.TaskList(ctx, &store.TaskListParams{
		JobID: p.JobID, Kind: domain.KindChunk, State: p.State, Limit: limit + 1, AfterIndex: after,
	})
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("list tasks of job %s: %w", p.JobID, err))
	}
	next := ""
	if len(tasks) > limit {
		tasks = tasks[:limit]
		next = encodeCursor(strconv.Itoa(tasks[limit-1].ChunkIndex))
	}
	views := make([]*TaskView, len(tasks))
	for i, t := range tasks {
		views[i] = &TaskView{Task: t, Job: job}
	}
	return views, next, nil
}

// JobResult returns a completed job's final CSV; before that, ErrNotReady.
func (e *Engine) JobResult(ctx context.Context, id string) ([]byte, error) {
	j, err := e.store.JobGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "job %q", id)
	}
	if j.Status != domain.JobCompleted {
		return nil, fmt.Errorf("job %s is %s; its result exists once it is completed: %w", id, j.Status, domain.ErrNotReady)
	}
	return j.Result, nil
}

// CancelJob cancels a job and every task of it not yet final. Cancelling a
// job that is already final changes nothing and returns it as it is.
func (e *Engine) CancelJob(ctx context.Context, id string) (*JobView, error) {
	var job *domain.Job
	err := e.tx(ctx, func(q store.Querier) error {
		j, err := q.JobGet(ctx, id)
		if err != nil {
			return notFound(err, "job %q", id)
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
		_, err = q.TaskCancelJob(ctx, j.ID, "", now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	e.log.InfoContext(ctx, "job cancel", "job_id", id, "status", job.Status)
	job.Result = nil
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
		j, err := q.JobGet(ctx, id)
		if err != nil {
			return notFound(err, "job %q", id)
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
		counts, err := q.JobTaskCounts(ctx, []string{j.ID})
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
		return q.TaskUpdate(ctx, root)
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

// TaskView is a task with the settings of its job.
type TaskView struct {
	*domain.Task
	Job *domain.Job
}

// GetTask returns a task with its job's settings.
func (e *Engine) GetTask(ctx context.Context, id string) (*TaskView, error) {
	t, err := e.store.TaskGet(ctx, id)
	if err != nil {
		return nil, notFound(err, "task %q", id)
	}
	return e.taskView(ctx, t)
}

func (e *Engine) taskView(ctx context.Context, t *domain.Task) (*TaskView, error) {
	v := &TaskView{Task: t}
	if t.JobID != "" && t.Kind != domain.KindTree { // a tree's ID is no job's
		j, err := e.jobSettings(ctx, t.JobID)
		if err != nil {
			return nil, err
		}
		v.Job = j
	}
	return v, nil
}
