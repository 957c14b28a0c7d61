package domain

import "slices"

// TaskState is where a task is in its life.
type TaskState string

// The task states. Completed, failed and cancelled are final.
const (
	TaskWaiting   TaskState = "waiting"   // upstream tasks are not all done
	TaskPending   TaskState = "pending"   // runnable once RunAfter has passed
	TaskLeased    TaskState = "leased"    // held by LeaseOwner until LeaseExpiresAt
	TaskCompleted TaskState = "completed" // result recorded
	TaskFailed    TaskState = "failed"    // failed for good
	TaskCancelled TaskState = "cancelled" // stopped because its tree stopped
)

// Final reports whether no further transition can leave s.
func (s TaskState) Final() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// TaskStates are the task states, in the order of a task's life.
var TaskStates = []TaskState{TaskWaiting, TaskPending, TaskLeased, TaskCompleted, TaskFailed, TaskCancelled}

// Valid reports whether s is one of the task states.
func (s TaskState) Valid() bool { return slices.Contains(TaskStates, s) }

// JobStatus is where a job is in its life.
type JobStatus string

// The job statuses. Completed, failed and cancelled are final.
const (
	JobPending   JobStatus = "pending"   // no chunk leased yet
	JobRunning   JobStatus = "running"   // at least one chunk leased
	JobCompleted JobStatus = "completed" // final CSV stitched
	JobFailed    JobStatus = "failed"    // a task failed for good
	JobCancelled JobStatus = "cancelled" // cancelled by a client
)

// Final reports whether no further transition can leave s.
func (s JobStatus) Final() bool {
	return s == JobCompleted || s == JobFailed || s == JobCancelled
}

// Valid reports whether s is one of the job statuses.
func (s JobStatus) Valid() bool {
	switch s {
	case JobPending, JobRunning, JobCompleted, JobFailed, JobCancelled:
		return true
	}
	return false
}

// TaskKind says what a task is for.
type TaskKind string

// The task kinds.
const (
	KindChunk  TaskKind = "chunk"  // scores one chunk of a job's table; run by workers
	KindStitch TaskKind = "stitch" // merges a job's chunk outputs; run by coordinators
	KindTree   TaskKind = "tree"   // a task of a general task tree; run by workers
)

// Order is the direction in which scores rank.
type Order string

// The orders.
const (
	Desc Order = "desc" // higher scores first
	Asc  Order = "asc"  // lower scores first
)
