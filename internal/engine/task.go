package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Reads of tasks, each with the settings of its job.

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
	job, err := e.clientJobSettings(ctx, p.JobID)
	if err != nil {
		return nil, "", err
	}
	tasks, err := e.store.TaskList(ctx, &store.TaskListParams{
		JobID: p.JobID, Kind: domain.KindChunk, State: p.State, Limit: limit + 1, AfterIndex: after,
	})
	if err != nil {
		return nil, "", mapStoreErr(fmt.Errorf("list tasks of job %s: %w", p.JobID, err))
	}
	if len(tasks) == 0 {
		// The settings may come from memory: an empty page may be that
		// of a job another process deleted (retention) since.
		if _, err := e.store.JobGet(ctx, p.JobID); err != nil {
			return nil, "", notFound(err, "job %q", p.JobID)
		}
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

// TaskView is a task with the settings of its job.
type TaskView struct {
	*domain.Task
	Job *domain.Job
	// Input, when set, is where the worker reads a claimed chunk of an
	// upload straight from the blob store (Config.Presign).
	Input *SignedInput
	// Args, of a tree task handed out by a claim, are its arguments by
	// position.
	Args []json.RawMessage
}

// GetTask returns a task with its job's settings.
func (e *Engine) GetTask(ctx context.Context, id string) (*TaskView, error) {
	t, err := clientTask(ctx, ballotReader(e.store), id)
	if err != nil {
		return nil, err
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
