// Package storetest is the conformance suite of the storage contract: one set
// of tests, Exercise, that every store.Store implementation runs against a real
// database, and the fixtures those tests build jobs and tasks with. It holds no
// implementation of its own and is no mock.
//
// Where the contract's doc comments leave a choice open, the suite makes it,
// and says so in a comment beside the subtest that pins it. Extend the suite
// first whenever the contract changes.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// newFunc returns a fresh, empty, migrated store that is closed when t ends.
type newFunc = func(t *testing.T) store.Store

// Exercise runs the whole conformance suite against the implementation that
// newStore builds. Every call of newStore must return a fresh, empty, migrated
// store and arrange (with t.Cleanup) to close it when t ends; subtests call it
// concurrently, once each.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	t.Run("Job", func(t *testing.T) { t.Parallel(); exerciseJobs(t, newStore) })
	t.Run("JobList", func(t *testing.T) { t.Parallel(); exerciseJobList(t, newStore) })
	t.Run("JobResult", func(t *testing.T) { t.Parallel(); exerciseJobResult(t, newStore) })
	t.Run("JobMarker", func(t *testing.T) { t.Parallel(); exerciseJobMarkers(t, newStore) })
	t.Run("Task", func(t *testing.T) { t.Parallel(); exerciseTasks(t, newStore) })
	t.Run("TaskClaim", func(t *testing.T) { t.Parallel(); exerciseClaim(t, newStore) })
	t.Run("FairClaim", func(t *testing.T) { t.Parallel(); exerciseFairClaim(t, newStore) })
	t.Run("Lifecycle", func(t *testing.T) { t.Parallel(); exerciseLifecycle(t, newStore) })
	t.Run("Tx", func(t *testing.T) { t.Parallel(); exerciseTx(t, newStore) })
	t.Run("Upload", func(t *testing.T) { t.Parallel(); exerciseUploads(t, newStore) })
	t.Run("TaskLog", func(t *testing.T) { t.Parallel(); exerciseTaskLogs(t, newStore) })
	t.Run("TaskArg", func(t *testing.T) { t.Parallel(); exerciseTaskArgs(t, newStore) })
	t.Run("Outbox", func(t *testing.T) { t.Parallel(); exerciseOutbox(t, newStore) })
	t.Run("Inspect", func(t *testing.T) { t.Parallel(); exerciseInspect(t, newStore) })
	t.Run("Retention", func(t *testing.T) { t.Parallel(); exerciseRetention(t, newStore) })
	t.Run("Creation", func(t *testing.T) { t.Parallel(); exerciseCreation(t, newStore) })
	t.Run("Session", func(t *testing.T) { t.Parallel(); exerciseSessions(t, newStore) })
	t.Run("Installation", func(t *testing.T) { t.Parallel(); exerciseInstallation(t, newStore) })
	t.Run("Account", func(t *testing.T) { t.Parallel(); exerciseAccounts(t, newStore) })
	t.Run("AccountUse", func(t *testing.T) { t.Parallel(); exerciseAccountUse(t, newStore) })
	t.Run("Accounting", func(t *testing.T) { t.Parallel(); exerciseAccounting(t, newStore) })
	t.Run("WorkerKey", func(t *testing.T) { t.Parallel(); exerciseWorkerKeys(t, newStore) })
	t.Run("TaskListOpen", func(t *testing.T) { t.Parallel(); exerciseTaskListOpen(t, newStore) })
	t.Run("TaskLockMany", func(t *testing.T) { t.Parallel(); exerciseTaskLockMany(t, newStore) })
	t.Run("TaskCountVoting", func(t *testing.T) { t.Parallel(); exerciseTaskCountVoting(t, newStore) })
	t.Run("Cache", func(t *testing.T) { t.Parallel(); exerciseCache(t, newStore) })
}

// Epoch is the fixed instant fixtures are created at: UTC, whole microseconds.
func Epoch() time.Time { return time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC) }

// StitchTaskID is the ID fixtures give the stitch task of job jobID.
func StitchTaskID(jobID string) string { return "0:" + jobID + ".stitch" }

// ChunkTaskID is the ID fixtures give chunk index of job jobID.
func ChunkTaskID(jobID string, index int) string { return fmt.Sprintf("0:%s.%06d", jobID, index) }

// NewJob returns a valid pending job with ID id created at createdAt, whose
// root task is StitchTaskID(id). Its Version is 0, ready to insert.
func NewJob(id string, createdAt time.Time) *domain.Job {
	return &domain.Job{
		ID:           id,
		Name:         "job " + id,
		Owner:        domain.AdminAccount,
		Workload:     "tanimoto",
		Parameters:   json.RawMessage(`{"query": "CCO", "radius":2}`),
		ChunkRows:    1000,
		HasHeader:    true,
		TopK:         10,
		ScoreColumn:  domain.DefaultScoreColumn,
		Order:        domain.Desc,
		MaxAttempts:  domain.DefaultMaxAttempts,
		LeaseSeconds: 60,
		Status:       domain.JobPending,
		RootTaskID:   StitchTaskID(id),
		RequestHash:  strings.Repeat("0f", 32),
		CreatedAt:    createdAt,
		UpdatedAt:    createdAt,
	}
}

// NewTasks returns the task tree of j with n chunks: element 0 is the stitch
// task (waiting on n upstreams) and elements 1..n are the chunk tasks, pending
// and runnable at once (no RunAfter), in ChunkIndex order, with j's timeout (the
// stitch task has none). It does not change j.
func NewTasks(j *domain.Job, n int) []*domain.Task {
	out := make([]*domain.Task, 0, n+1)
	out = append(out, &domain.Task{
		ID:               StitchTaskID(j.ID),
		JobID:            j.ID,
		Kind:             domain.KindStitch,
		Workload:         "scimesh.stitch",
		ChunkIndex:       -1,
		State:            domain.TaskWaiting,
		MaxAttempts:      j.MaxAttempts,
		LeaseSeconds:     j.LeaseSeconds,
		Priority:         j.Priority,
		JobCreatedAt:     j.CreatedAt,
		Owner:            j.Owner,
		PendingUpstreams: n,
		CreatedAt:        j.CreatedAt,
		UpdatedAt:        j.CreatedAt,
	})
	for i := range n {
		out = append(out, &domain.Task{
			ID:             ChunkTaskID(j.ID, i),
			JobID:          j.ID,
			Kind:           domain.KindChunk,
			Workload:       j.Workload,
			ChunkIndex:     i,
			State:          domain.TaskPending,
			MaxAttempts:    j.MaxAttempts,
			LeaseSeconds:   j.LeaseSeconds,
			TimeoutSeconds: j.TimeoutSeconds,
			Priority:       j.Priority,
			JobCreatedAt:   j.CreatedAt,
			Owner:          j.Owner,
			InputURI:       fmt.Sprintf("blob:chunks/%s/%d.csv", j.ID, i),
			InputSHA256:    strings.Repeat("a1", 32),
			InputBytes:     int64(1000 + i),
			DownstreamID:   StitchTaskID(j.ID),
			CreatedAt:      j.CreatedAt,
			UpdatedAt:      j.CreatedAt,
		})
	}
	return out
}

// JobDiff describes how got differs from want, field by field, or returns ""
// when they are equal. Times must be equal instants and, unless zero, in UTC.
func JobDiff(got, want *domain.Job) string { return structDiff(got, want) }

// TaskDiff describes how got differs from want, field by field, or returns ""
// when they are equal. Times must be equal instants and, unless zero, in UTC;
// a nil Metrics must come back nil.
func TaskDiff(got, want *domain.Task) string { return structDiff(got, want) }

func structDiff(got, want any) string {
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	if gv.IsNil() || wv.IsNil() {
		if gv.IsNil() != wv.IsNil() {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	}
	gv, wv = gv.Elem(), wv.Elem()
	var b strings.Builder
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if msg := valueDiff(gv.Field(i).Interface(), wv.Field(i).Interface()); msg != "" {
			fmt.Fprintf(&b, "%s: %s; ", name, msg)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func valueDiff(got, want any) string {
	switch w := want.(type) {
	case time.Time:
		g := got.(time.Time)
		switch {
		case w.IsZero() && g.IsZero():
			return ""
		case !g.Equal(w):
			return fmt.Sprintf("got %s, want %s", fmtTime(g), fmtTime(w))
		case g.Location() != time.UTC:
			return fmt.Sprintf("got location %s, want UTC", g.Location())
		}
		return ""
	case json.RawMessage:
		g := got.(json.RawMessage)
		if (g == nil) != (w == nil) || !bytes.Equal(g, w) {
			return fmt.Sprintf("got %s (nil %t), want %s (nil %t)", g, g == nil, w, w == nil)
		}
		return ""
	case []byte:
		if g := got.([]byte); !bytes.Equal(g, w) {
			return fmt.Sprintf("got %q, want %q", g, w)
		}
		return ""
	case []domain.Ballot:
		// Ballots compare as stored: their times as instants, in UTC.
		if g, w := store.EncodeBallots(got.([]domain.Ballot)), store.EncodeBallots(w); !bytes.Equal(g, w) {
			return fmt.Sprintf("got %s, want %s", g, w)
		}
		return ""
	case *domain.SecondLease:
		if g, w := store.EncodeSecondLease(got.(*domain.SecondLease)), store.EncodeSecondLease(w); !bytes.Equal(g, w) {
			return fmt.Sprintf("got %s, want %s", g, w)
		}
		return ""
	case []string:
		if g := got.([]string); !slices.Equal(g, w) || (g == nil) != (w == nil) {
			return fmt.Sprintf("got %q (nil %t), want %q (nil %t)", g, g == nil, w, w == nil)
		}
		return ""
	case map[string]string:
		if g := got.(map[string]string); !maps.Equal(g, w) || (g == nil) != (w == nil) {
			return fmt.Sprintf("got %q (nil %t), want %q (nil %t)", g, g == nil, w, w == nil)
		}
		return ""
	}
	if got != want {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	return ""
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Format(time.RFC3339Nano)
}

// Test helpers shared by the suite's files.

func insertJobs(t *testing.T, q store.Querier, jobs ...*domain.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := q.JobInsert(t.Context(), j); err != nil {
			t.Fatalf("JobInsert(%s): %v", j.ID, err)
		}
	}
}

func insertTasks(t *testing.T, q store.Querier, tasks ...*domain.Task) {
	t.Helper()
	if err := q.TaskInsert(t.Context(), tasks); err != nil {
		t.Fatalf("TaskInsert(%d tasks): %v", len(tasks), err)
	}
}

func getJob(t *testing.T, q store.Querier, id string) *domain.Job {
	t.Helper()
	j, err := q.JobGet(t.Context(), id)
	if err != nil {
		t.Fatalf("JobGet(%s): %v", id, err)
	}
	return j
}

func getTask(t *testing.T, q store.Querier, id string) *domain.Task {
	t.Helper()
	tk, err := q.TaskGet(t.Context(), id)
	if err != nil {
		t.Fatalf("TaskGet(%s): %v", id, err)
	}
	return tk
}

func checkJob(t *testing.T, what string, got, want *domain.Job) {
	t.Helper()
	if d := JobDiff(got, want); d != "" {
		t.Errorf("%s: job differs: %s", what, d)
	}
}

func checkTask(t *testing.T, what string, got, want *domain.Task) {
	t.Helper()
	if d := TaskDiff(got, want); d != "" {
		t.Errorf("%s: task %s differs: %s", what, want.ID, d)
	}
}

func checkErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func cloneJob(j *domain.Job) *domain.Job {
	c := *j
	c.Parameters = bytes.Clone(j.Parameters)
	c.Result = bytes.Clone(j.Result)
	c.Columns = slices.Clone(j.Columns)
	return &c
}

func cloneTask(tk *domain.Task) *domain.Task {
	c := *tk
	c.Result = bytes.Clone(tk.Result)
	c.Metrics = bytes.Clone(tk.Metrics)
	c.Ballots = slices.Clone(tk.Ballots)
	return &c
}

func taskIDs(tasks []*domain.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

func jobIDs(jobs []*domain.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func checkIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Errorf("%s: got IDs %q, want %q", what, got, want)
	}
}
