package store

import (
	"context"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// RetentionQuerier is the part of the contract that deletes what is past
// its retention: final jobs and finished trees with everything of theirs,
// and uploads that nothing needs any more. It is embedded in Querier.
//
// Deleting a job or a tree is two-phase, so that each transaction stays
// small and a crash between two of them leaves nothing visible half
// deleted: JobDelete and TaskTreeDelete delete the job row (a tree has
// none) and record a purge in the same statement group; the purge's tasks,
// their logs and arguments then go in batches (TaskListIDs, TaskLogDelete,
// TaskDelete), and PurgeDelete ends it once no task is left. Every delete
// is guarded and idempotent: run twice, or by two processes at once, it
// deletes each row once and the second run finds nothing.
type RetentionQuerier interface {
	// JobListExpired returns final jobs (completed, failed or cancelled)
	// that finished before p.Before, by FinishedAt then ID ascending,
	// after p.After when set, at most p.Limit of them.
	JobListExpired(ctx context.Context, p *JobListExpiredParams) ([]ExpiredJob, error)
	// JobDelete deletes each job of p.IDs that is still final and finished
	// before p.Before, records a purge (kind "job") of each one it deleted,
	// and returns those it deleted. A job retried, or deleted by another
	// process, meanwhile is left out.
	JobDelete(ctx context.Context, p *JobDeleteParams) ([]ExpiredJob, error)

	// TaskTreeListExpired returns the finished trees: trees (tasks of kind
	// tree sharing one JobID) whose every task on this database is final
	// and finished before p.Before. Trees are walked by the FinishedAt and
	// ID of their tasks, after p.After when set; each tree comes once per
	// call, with the position of its first task walked, at most p.Limit
	// trees per call.
	TaskTreeListExpired(ctx context.Context, p *TaskTreeListExpiredParams) ([]ExpiredTree, error)
	// TaskTreeDelete records a purge (kind "tree") of each tree of p.IDs
	// that is still finished before p.Before (as TaskTreeListExpired) and
	// not being purged already, and returns those it recorded.
	TaskTreeDelete(ctx context.Context, p *TaskTreeDeleteParams) ([]string, error)

	// PurgeList returns up to limit purges under way, oldest first.
	PurgeList(ctx context.Context, limit int) ([]Purge, error)
	// PurgeDelete ends the purge of id; a missing one is no error.
	PurgeDelete(ctx context.Context, id string) error

	// TaskListIDs returns the IDs of up to p.Limit tasks of any kind whose
	// JobID is p.JobID, by ID ascending.
	TaskListIDs(ctx context.Context, p *TaskListIDsParams) ([]string, error)
	// TaskLogDelete deletes up to p.Limit log lines of the tasks p.TaskIDs
	// and returns how many it deleted.
	TaskLogDelete(ctx context.Context, p *TaskLogDeleteParams) (int, error)
	// TaskDelete deletes the tasks p.IDs and their arguments (task_args)
	// and returns how many of each it deleted. Missing tasks are no error.
	TaskDelete(ctx context.Context, p *TaskDeleteParams) (TaskDeleted, error)

	// UploadListExpired returns uploads created before p.Before, and not
	// used by a job created since (UploadTouch), that no job names except
	// completed ones, by CreatedAt then ID ascending, after p.After when
	// set, at most p.Limit of them. A failed or cancelled job keeps its
	// upload, since it may be retried.
	UploadListExpired(ctx context.Context, p *UploadListExpiredParams) ([]*domain.Upload, error)
	// UploadDelete deletes the upload p.ID if it is still expired as
	// UploadListExpired says, and reports whether it did.
	UploadDelete(ctx context.Context, p *UploadDeleteParams) (bool, error)
	// UploadTouch records that a job is being created over the upload
	// p.ID at p.Now, so that retention keeps it; ErrNotFound when it is
	// gone.
	// Run it in the transaction that creates the job: it then either sees
	// the upload deleted, or keeps a concurrent UploadDelete from
	// deleting it.
	UploadTouch(ctx context.Context, p *UploadTouchParams) error
	// UploadListBlobKeys returns which of keys some upload names as its
	// BlobKey, in any order.
	UploadListBlobKeys(ctx context.Context, keys []string) ([]string, error)
}

// ExpiredJob is a job due for deletion, and its place in JobListExpired's
// order.
type ExpiredJob struct {
	ID         string
	FinishedAt time.Time
	UploadID   string // "" for hosted inputs
}

// ExpiredCursor is a position in a listing by time then ID.
type ExpiredCursor struct {
	At time.Time
	ID string
}

// JobListExpiredParams selects final jobs finished before Before.
type JobListExpiredParams struct {
	Before time.Time
	After  *ExpiredCursor // nil from the start
	Limit  int
}

// JobDeleteParams names jobs to delete if they are still expired at Before.
type JobDeleteParams struct {
	IDs    []string
	Before time.Time
	Now    time.Time // when the purges are recorded
}

// ExpiredTree is a finished tree and the position of its first task in
// TaskTreeListExpired's walk.
type ExpiredTree struct {
	ID    string
	After ExpiredCursor // pass the last one as After to continue
}

// TaskTreeListExpiredParams selects trees finished before Before.
type TaskTreeListExpiredParams struct {
	Before time.Time
	After  *ExpiredCursor // nil from the start
	Limit  int
}

// TaskTreeDeleteParams names trees to purge if they are still finished
// before Before.
type TaskTreeDeleteParams struct {
	IDs    []string
	Before time.Time
	Now    time.Time
}

// Purge is a job or a tree whose tasks are being deleted.
type Purge struct {
	ID        string // the job's or tree's ID: the JobID of its tasks
	Kind      string // "job" or "tree"
	CreatedAt time.Time
}

// TaskListIDsParams selects a page of a job's or tree's task IDs.
type TaskListIDsParams struct {
	JobID string
	Limit int
}

// TaskLogDeleteParams selects log lines to delete.
type TaskLogDeleteParams struct {
	TaskIDs []string
	Limit   int
}

// TaskDeleteParams names tasks to delete.
type TaskDeleteParams struct {
	IDs []string
}

// TaskDeleted counts what TaskDelete deleted.
type TaskDeleted struct {
	Tasks int
	Args  int
}

// UploadListExpiredParams selects uploads that nothing needs since Before.
type UploadListExpiredParams struct {
	Before time.Time
	After  *ExpiredCursor // nil from the start
	Limit  int
}

// UploadTouchParams names the upload a job is being created over, and
// when.
type UploadTouchParams struct {
	ID  string
	Now time.Time
}

// UploadDeleteParams names an upload to delete if it is still expired at
// Before.
type UploadDeleteParams struct {
	ID     string
	Before time.Time
}
