package storetest

import (
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseJobMarkers(t *testing.T, newStore newFunc) {
	t.Run("VersionsOfTheJobAndItsRoot", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		j := NewJob("j1", at)
		hidden := NewJob("j2", at)
		hidden.Creating = true
		rootless := NewJob("j3", at)
		insertJobs(t, s, j, hidden, rootless)
		tasks := NewTasks(j, 2)
		insertTasks(t, s, tasks...)
		insertTasks(t, s, NewTasks(hidden, 1)...)

		check := func(what string, want map[string]store.JobMarker) {
			t.Helper()
			got, err := s.JobListMarkers(ctx, []string{"j1", "j2", "j3", "nope"})
			if err != nil {
				t.Fatalf("%s: JobListMarkers: %v", what, err)
			}
			if len(got) != len(want) {
				t.Errorf("%s: got markers %v, want %v", what, got, want)
			}
			for id, w := range want {
				g, ok := got[id]
				if !ok || g.Status != w.Status || g.Version != w.Version || g.RootVersion != w.RootVersion ||
					!g.UpdatedAt.Equal(w.UpdatedAt) || g.UpdatedAt.Location() != time.UTC {
					t.Errorf("%s: marker of %s is %+v (present %t), want %+v", what, id, g, ok, w)
				}
			}
		}
		// Pinned: a job still creating is absent, as from JobList; a job
		// without its root row has RootVersion 0.
		check("inserted", map[string]store.JobMarker{
			"j1": {Status: domain.JobPending, Version: j.Version, RootVersion: tasks[0].Version, UpdatedAt: at},
			"j3": {Status: domain.JobPending, Version: rootless.Version, UpdatedAt: at},
		})

		// UpdatedAt is the later of the two rows' UpdatedAt.
		later, latest := at.Add(2*time.Second), at.Add(3*time.Second)
		root, err := s.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: tasks[0].ID, N: 1, Now: latest})
		if err != nil {
			t.Fatal(err)
		}
		if root.Version == tasks[0].Version {
			t.Fatalf("TaskDecrementUpstreams left the root at version %d", root.Version)
		}
		// A claim of one of its chunks starts the job.
		if got := claim(t, s, store.TaskClaimParams{Owners: []string{"w"}, Kinds: chunkKinds, Now: later}); len(got) != 1 || got[0].JobID != "j1" {
			t.Fatalf("claim = %v, want a chunk of j1", taskIDs(got))
		}
		running := getJob(t, s, "j1")
		check("a chunk done and the job running", map[string]store.JobMarker{
			"j1": {Status: domain.JobRunning, Version: running.Version, RootVersion: root.Version, UpdatedAt: latest},
			"j3": {Status: domain.JobPending, Version: rootless.Version, UpdatedAt: at},
		})
		if running.Version == j.Version {
			t.Errorf("the claim that started the job left it at version %d", running.Version)
		}

		// Inside a transaction it sees the transaction's writes.
		err = s.InTx(ctx, func(q store.Querier) error {
			r := getTask(t, q, tasks[0].ID)
			r.PendingUpstreams = 0
			if err := q.TaskUpdate(ctx, r); err != nil {
				return err
			}
			got, err := q.JobListMarkers(ctx, []string{"j1"})
			if err != nil {
				return err
			}
			if got["j1"].RootVersion != r.Version {
				t.Errorf("in a transaction: root version %d, want %d", got["j1"].RootVersion, r.Version)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		if got, err := s.JobListMarkers(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("JobListMarkers(nil) = %v, %v; want none", got, err)
		}
	})
}
