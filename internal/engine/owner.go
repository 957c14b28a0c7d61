package engine

import (
	"context"
	"fmt"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Ownership: jobs, uploads and task trees belong to the account that
// created them (domain.CallerOf the request that did), and a task to its
// job's or tree's. What the caller of a request may not see does not exist
// for it: every read and change a client can ask for goes through the
// functions below, which answer another account's object exactly as a
// missing one, so that no answer hints that it exists.

// hidden reports whether the caller of ctx may not see what owner owns.
func hidden(ctx context.Context, owner string) bool { return !domain.CallerOf(ctx).Sees(owner) }

// clientJob reads job id for the caller of ctx through q: a job still
// being created, or another account's, is ErrNotFound.
func clientJob(ctx context.Context, q store.Querier, id string) (*domain.Job, error) {
	j, err := q.JobGet(ctx, id)
	if err == nil && (j.Creating || hidden(ctx, j.Owner)) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFound(err, "job %q", id)
	}
	return j, nil
}

// clientTask reads task id for the caller of ctx through q: another
// account's task is ErrNotFound.
func clientTask(ctx context.Context, q store.Querier, id string) (*domain.Task, error) {
	t, err := q.TaskGet(ctx, id)
	if err == nil && hidden(ctx, t.Owner) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, notFound(err, "task %q", id)
	}
	return t, nil
}

// clientJobSettings is jobSettings for the caller of ctx: another
// account's job is ErrNotFound.
func (e *Engine) clientJobSettings(ctx context.Context, id string) (*domain.Job, error) {
	j, err := e.jobSettings(ctx, id)
	if err == nil && hidden(ctx, j.Owner) {
		err = fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, notFound(err, "job %q", id)
	}
	return j, nil
}
