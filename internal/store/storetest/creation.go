package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseCreation covers jobs created in batches (Creating), the reads
// that leave results out, and the claim's handling of backoff.
func exerciseCreation(t *testing.T, newStore newFunc) {
	t.Run("ListsLeaveResultsOut", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("j1", Epoch())
		j.Status, j.Result = domain.JobCompleted, []byte("id,score\n1,0.5\n")
		insertJobs(t, s, j)
		tasks := NewTasks(j, 3)
		for _, tk := range tasks[1:] {
			tk.State, tk.Result = domain.TaskCompleted, []byte("id,score\n1,0.5\n")
		}
		insertTasks(t, s, tasks...)
		jobs, err := s.JobList(t.Context(), &store.JobListParams{Limit: 10})
		if err != nil || len(jobs) != 1 || jobs[0].Result != nil {
			t.Fatalf("JobList = %v, %v; want one job with Result nil", jobs, err)
		}
		if got := getJob(t, s, "j1"); got.Result != nil {
			t.Errorf("JobGet read Result %q; only JobResultRead may", got.Result)
		}
		list, err := s.TaskList(t.Context(), &store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, AfterIndex: -1})
		if err != nil || len(list) != 3 {
			t.Fatalf("TaskList = %d tasks, %v", len(list), err)
		}
		for _, tk := range list {
			if tk.Result != nil {
				t.Errorf("TaskList read the output of %s", tk.ID)
			}
		}
		if got := getTask(t, s, list[0].ID); got.Result == nil {
			t.Errorf("TaskGet of %s has no Result", got.ID)
		}
	})

	t.Run("CreatingJobsAreHiddenThenWhole", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("j1", Epoch())
		j.Creating = true
		insertJobs(t, s, j)
		if got := getJob(t, s, "j1"); !got.Creating {
			t.Errorf("JobGet: Creating false, want true")
		}
		if jobs, _ := s.JobList(t.Context(), &store.JobListParams{Limit: 10}); len(jobs) != 0 {
			t.Errorf("JobList shows %d creating jobs, want none", len(jobs))
		}
		later := Epoch().Add(time.Second)
		if err := s.JobUpdateCreation(t.Context(), &store.JobUpdateCreationParams{ID: "j1", Now: later}); err != nil {
			t.Fatalf("JobUpdateCreation: %v", err)
		}
		if got := getJob(t, s, "j1"); !got.Creating || !got.UpdatedAt.Equal(later) {
			t.Errorf("after progress: Creating %v UpdatedAt %v, want true %v", got.Creating, got.UpdatedAt, later)
		}
		if err := s.JobUpdateCreation(t.Context(), &store.JobUpdateCreationParams{ID: "j1", Now: later, Done: true}); err != nil {
			t.Fatalf("JobUpdateCreation done: %v", err)
		}
		if jobs, _ := s.JobList(t.Context(), &store.JobListParams{Limit: 10}); len(jobs) != 1 || jobs[0].Creating {
			t.Errorf("JobList after done = %v, want the job, whole", jobs)
		}
		checkErr(t, "JobUpdateCreation of a whole job", s.JobUpdateCreation(t.Context(),
			&store.JobUpdateCreationParams{ID: "j1", Now: later}), store.ErrNotFound)
		if _, err := s.JobDeleteAbandoned(t.Context(), &store.JobDeleteAbandonedParams{ID: "j1", Before: later.Add(time.Hour), Limit: 10}); err == nil {
			t.Errorf("JobDeleteAbandoned deleted a whole job")
		}
	})

	t.Run("JobListAbandoned", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mk := func(id string, updated time.Duration) *domain.Job {
			j := NewJob(id, Epoch())
			j.Creating, j.UpdatedAt = true, Epoch().Add(updated)
			return j
		}
		given := mk("given-up", 40*time.Second) // abandoned already: listed whenever it last moved
		given.Status = domain.JobCancelled
		whole := NewJob("whole", Epoch()) // not creating: never listed
		insertJobs(t, s, mk("dead-2s", 2*time.Second), mk("live", 50*time.Second), given, mk("dead-1s", time.Second), whole)
		before := Epoch().Add(30 * time.Second)
		for _, c := range []struct {
			limit int
			want  []string
		}{
			{10, []string{"dead-1s", "dead-2s", "given-up"}}, // oldest UpdatedAt first
			{2, []string{"dead-1s", "dead-2s"}},
		} {
			got, err := s.JobListAbandoned(t.Context(), &store.JobListAbandonedParams{Before: before, Limit: c.limit})
			if err != nil {
				t.Fatalf("JobListAbandoned(limit %d): %v", c.limit, err)
			}
			checkIDs(t, fmt.Sprintf("JobListAbandoned(limit %d)", c.limit), jobIDs(got), c.want)
		}
	})

	t.Run("AbandonedJobsAreDeletedInSteps", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("dead", Epoch())
		j.Creating = true
		live := NewJob("live", Epoch())
		live.Creating, live.UpdatedAt = true, Epoch().Add(time.Minute)
		insertJobs(t, s, j, live)
		insertTasks(t, s, NewTasks(j, 25)...)
		before := Epoch().Add(30 * time.Second)
		got, err := s.JobListAbandoned(t.Context(), &store.JobListAbandonedParams{Before: before, Limit: 10})
		if err != nil || len(got) != 1 || got[0].ID != "dead" {
			t.Fatalf("JobListAbandoned = %v, %v; want the dead job only", got, err)
		}
		if _, err := s.JobDeleteAbandoned(t.Context(), &store.JobDeleteAbandonedParams{ID: "live", Before: before, Limit: 10}); err == nil {
			t.Errorf("JobDeleteAbandoned deleted a job whose creation goes on")
		}
		steps := 0
		for gone := false; !gone; steps++ {
			if gone, err = s.JobDeleteAbandoned(t.Context(), &store.JobDeleteAbandonedParams{ID: "dead", Before: before, Limit: 10}); err != nil {
				t.Fatalf("JobDeleteAbandoned step %d: %v", steps, err)
			}
			if steps == 0 {
				// Abandoned now: its creation may not go on.
				checkErr(t, "JobUpdateCreation of an abandoned job", s.JobUpdateCreation(t.Context(),
					&store.JobUpdateCreationParams{ID: "dead", Now: before}), store.ErrNotFound)
			}
		}
		if steps != 3 {
			t.Errorf("26 tasks deleted in %d steps of 10, want 3", steps)
		}
		_, err = s.JobGet(t.Context(), "dead")
		checkErr(t, "JobGet of the deleted job", err, store.ErrNotFound)
		_, err = s.TaskGet(t.Context(), ChunkTaskID("dead", 0))
		checkErr(t, "TaskGet of a deleted job's task", err, store.ErrNotFound)
	})

	t.Run("BackoffStaysOutUntilDue", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("j1", Epoch())
		insertJobs(t, s, j)
		tasks := NewTasks(j, 2)
		tasks[1].RunAfter = Epoch().Add(time.Minute) // in backoff
		insertTasks(t, s, tasks...)
		if got := getTask(t, s, tasks[2].ID); !got.RunAfter.IsZero() {
			t.Errorf("a task runnable at once has RunAfter %v, want none", got.RunAfter)
		}
		claim := func(now time.Time) []*domain.Task {
			if _, err := s.TaskMakeRunnable(t.Context(), &store.TaskMakeRunnableParams{Now: now, Limit: 10}); err != nil {
				t.Fatalf("TaskMakeRunnable: %v", err)
			}
			got, err := s.TaskClaim(t.Context(), &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 10),
				Kinds: []domain.TaskKind{domain.KindChunk}, Workloads: []string{j.Workload}, Now: now})
			if err != nil {
				t.Fatalf("TaskClaim: %v", err)
			}
			return got
		}
		if got := claim(Epoch().Add(time.Second)); len(got) != 1 || got[0].ID != tasks[2].ID {
			t.Fatalf("claim before the backoff passed = %v, want only %s", got, tasks[2].ID)
		}
		if got := claim(Epoch().Add(time.Minute)); len(got) != 1 || got[0].ID != tasks[1].ID {
			t.Fatalf("claim once the backoff passed = %v, want %s", got, tasks[1].ID)
		}
	})
}
