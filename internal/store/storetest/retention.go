package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func exerciseRetention(t *testing.T, newStore newFunc) {
	day := 24 * time.Hour
	before := Epoch().Add(day)
	// finished returns a job of status st that finished at at.
	finished := func(id string, st domain.JobStatus, at time.Time) *domain.Job {
		j := NewJob(id, Epoch().Add(-day))
		j.Status = st
		if st.Final() {
			j.FinishedAt = at
		}
		return j
	}
	t.Run("JobListDelete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		insertJobs(t, s,
			finished("j2", domain.JobFailed, Epoch().Add(time.Hour)),
			finished("j1", domain.JobCompleted, Epoch()),
			finished("j3", domain.JobCancelled, Epoch().Add(time.Hour)),
			finished("run", domain.JobRunning, time.Time{}),
			finished("new", domain.JobCompleted, before), // finished at the bound: not before it
		)
		list := func(after *store.ExpiredCursor, limit int) []string {
			t.Helper()
			got, err := s.JobListExpired(ctx, &store.JobListExpiredParams{Before: before, After: after, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, j := range got {
				ids = append(ids, j.ID)
			}
			return ids
		}
		checkIDs(t, "JobListExpired", list(nil, 0), []string{"j1", "j2", "j3"})
		checkIDs(t, "JobListExpired limit 2", list(nil, 2), []string{"j1", "j2"})
		checkIDs(t, "JobListExpired after j2", list(&store.ExpiredCursor{At: Epoch().Add(time.Hour), ID: "j2"}, 0), []string{"j3"})

		// The guard: a running job, a job finished since, and a missing
		// one are left out even when named.
		got, err := s.JobDelete(ctx, &store.JobDeleteParams{IDs: []string{"j1", "run", "new", "none", "j2"}, Before: before, Now: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "j1" || !got[0].FinishedAt.Equal(Epoch()) || got[1].ID != "j2" {
			t.Fatalf("JobDelete = %+v, want j1 and j2", got)
		}
		for _, id := range []string{"j1", "j2"} {
			_, err := s.JobGet(ctx, id)
			checkErr(t, "JobGet of a deleted job", err, store.ErrNotFound)
		}
		for _, id := range []string{"j3", "run", "new"} {
			getJob(t, s, id)
		}
		purges, err := s.PurgeList(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(purges) != 2 || purges[0].Kind != "job" || !purges[0].CreatedAt.Equal(before) {
			t.Fatalf("PurgeList = %+v, want the purges of j1 and j2", purges)
		}
		again, err := s.JobDelete(ctx, &store.JobDeleteParams{IDs: []string{"j1", "j2"}, Before: before, Now: before})
		if err != nil || len(again) != 0 {
			t.Fatalf("JobDelete again = %+v, %v; want nothing", again, err)
		}
		for _, p := range purges {
			if err := s.PurgeDelete(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PurgeDelete(ctx, "none"); err != nil {
			t.Fatalf("PurgeDelete of a missing purge: %v", err)
		}
		if left, _ := s.PurgeList(ctx, 0); len(left) != 0 {
			t.Fatalf("purges left after PurgeDelete: %+v", left)
		}
	})
	t.Run("JobDeleteConcurrent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		var ids []string
		for i := range 20 {
			id := fmt.Sprintf("j%02d", i)
			insertJobs(t, s, finished(id, domain.JobCompleted, Epoch()))
			ids = append(ids, id)
		}
		var mu sync.Mutex
		var deleted []string
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for {
					err := s.InTx(ctx, func(q store.Querier) error {
						got, err := q.JobDelete(ctx, &store.JobDeleteParams{IDs: ids, Before: before, Now: before})
						if err == nil {
							mu.Lock()
							for _, j := range got {
								deleted = append(deleted, j.ID)
							}
							mu.Unlock()
						}
						return err
					})
					if err == nil {
						return
					}
					if !errors.Is(err, store.ErrStale) && !errors.Is(err, store.ErrUnavailable) {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		slices.Sort(deleted)
		checkIDs(t, "jobs deleted by three concurrent JobDeletes", deleted, ids)
	})
	t.Run("TaskBatches", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j := finished("j", domain.JobCompleted, Epoch())
		other := finished("other", domain.JobCompleted, Epoch())
		insertJobs(t, s, j, other)
		insertTasks(t, s, NewTasks(j, 5)...)
		insertTasks(t, s, NewTasks(other, 1)...)
		for _, id := range []string{ChunkTaskID("j", 0), ChunkTaskID("j", 3), ChunkTaskID("other", 0)} {
			err := s.TaskLogAppend(ctx, &store.TaskLogAppendParams{TaskID: id, Attempt: 1, Lines: []string{"a", "b", "c"}, Now: Epoch(), MaxLines: 10})
			if err != nil {
				t.Fatal(err)
			}
		}
		removed := 0
		for {
			ids, err := s.TaskListIDs(ctx, &store.TaskListIDsParams{JobID: "j", Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 {
				break
			}
			if len(ids) > 4 {
				t.Fatalf("TaskListIDs limit 4 returned %d", len(ids))
			}
			for {
				n, err := s.TaskLogDelete(ctx, &store.TaskLogDeleteParams{TaskIDs: ids, Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if n > 2 {
					t.Fatalf("TaskLogDelete limit 2 deleted %d lines", n)
				}
				if n == 0 {
					break
				}
				removed += n
			}
			d, err := s.TaskDelete(ctx, &store.TaskDeleteParams{IDs: ids})
			if err != nil || d.Tasks != len(ids) {
				t.Fatalf("TaskDelete(%d tasks) = %+v, %v", len(ids), d, err)
			}
			if d, err := s.TaskDelete(ctx, &store.TaskDeleteParams{IDs: ids}); err != nil || d.Tasks != 0 {
				t.Fatalf("TaskDelete again = %+v, %v; want nothing", d, err)
			}
		}
		if removed != 6 {
			t.Errorf("deleted %d log lines of job j, want 6", removed)
		}
		_, err := s.TaskGet(ctx, StitchTaskID("j"))
		checkErr(t, "TaskGet of a deleted task", err, store.ErrNotFound)
		getTask(t, s, ChunkTaskID("other", 0))
		if lines, _ := s.TaskLogList(ctx, &store.TaskLogListParams{TaskID: ChunkTaskID("other", 0)}); len(lines) != 3 {
			t.Errorf("another job's log holds %d lines, want its 3", len(lines))
		}
	})
	t.Run("Trees", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		tree := func(root string, states []domain.TaskState, at time.Time) []*domain.Task {
			var out []*domain.Task
			for i, st := range states {
				id := root
				if i > 0 {
					id = fmt.Sprintf("%s.%d", root, i)
				}
				tk := &domain.Task{ID: id, JobID: root, Kind: domain.KindTree, Workload: "w", State: st,
					MaxAttempts: 1, LeaseSeconds: 60, CreatedAt: Epoch().Add(-day), UpdatedAt: at, RunAfter: Epoch().Add(-day)}
				if st.Final() {
					tk.FinishedAt = at.Add(time.Duration(i) * time.Second)
				}
				out = append(out, tk)
			}
			return out
		}
		done := []domain.TaskState{domain.TaskCompleted, domain.TaskCompleted, domain.TaskFailed}
		insertTasks(t, s, tree("0:a", done, Epoch())...)
		insertTasks(t, s, tree("0:b", []domain.TaskState{domain.TaskCompleted, domain.TaskLeased}, Epoch())...)
		insertTasks(t, s, tree("0:c", done, before.Add(-time.Second))...) // its last task finished at the bound
		insertTasks(t, s, tree("0:d", done[:1], Epoch().Add(time.Hour))...)
		if err := s.TaskArgInsert(ctx, []domain.TaskArg{{TaskID: "0:a", Position: 0, UpstreamID: "0:a.1"}, {TaskID: "0:a", Position: 1, Value: []byte("2")}}); err != nil {
			t.Fatal(err)
		}
		var walked []store.ExpiredTree
		var after *store.ExpiredCursor
		for {
			page, err := s.TaskTreeListExpired(ctx, &store.TaskTreeListExpiredParams{Before: before, After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			walked = append(walked, page...)
			if len(page) < 2 {
				break
			}
			after = &page[len(page)-1].After
		}
		var trees []string
		for _, w := range walked {
			if !slices.Contains(trees, w.ID) {
				trees = append(trees, w.ID)
			}
		}
		checkIDs(t, "trees walked by TaskTreeListExpired", trees, []string{"0:a", "0:d"})
		if len(walked) != 4 {
			t.Errorf("TaskTreeListExpired walked %d tasks, want 4 (3 of 0:a, 1 of 0:d): %+v", len(walked), walked)
		}
		got, err := s.TaskTreeDelete(ctx, &store.TaskTreeDeleteParams{IDs: []string{"0:a", "0:b", "0:c", "0:none"}, Before: before, Now: before})
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "TaskTreeDelete", got, []string{"0:a"})
		if again, err := s.TaskTreeDelete(ctx, &store.TaskTreeDeleteParams{IDs: []string{"0:a"}, Before: before, Now: before}); err != nil || len(again) != 0 {
			t.Fatalf("TaskTreeDelete of a tree being purged = %v, %v; want nothing", again, err)
		}
		ids, err := s.TaskListIDs(ctx, &store.TaskListIDsParams{JobID: "0:a"})
		if err != nil || len(ids) != 3 {
			t.Fatalf("TaskListIDs of tree 0:a = %v, %v", ids, err)
		}
		d, err := s.TaskDelete(ctx, &store.TaskDeleteParams{IDs: ids})
		if err != nil || d.Tasks != 3 || d.Args != 2 {
			t.Fatalf("TaskDelete of tree 0:a = %+v, %v; want 3 tasks and 2 arguments", d, err)
		}
		if args, _ := s.TaskArgList(ctx, "0:a"); len(args) != 0 {
			t.Errorf("arguments left of a deleted task: %+v", args)
		}
		if purges, _ := s.PurgeList(ctx, 0); len(purges) != 1 || purges[0].ID != "0:a" || purges[0].Kind != "tree" {
			t.Errorf("PurgeList = %+v, want the tree 0:a's", purges)
		}
	})
	t.Run("Uploads", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		up := func(id string, at time.Time) *domain.Upload {
			return &domain.Upload{ID: id, SHA256: "s", Bytes: 10, Rows: 2, BlobKey: "k-" + id[2:], BlobBytes: 9, CreatedAt: at}
		}
		for _, u := range []*domain.Upload{up("0:u1", Epoch()), up("0:u2", Epoch()), up("0:u3", Epoch()), up("0:u4", Epoch()),
			up("0:u5", before), up("0:u6", Epoch())} {
			if err := s.UploadInsert(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
		over := func(id, upload string, st domain.JobStatus) *domain.Job {
			j := finished(id, st, Epoch())
			j.UploadID = upload
			return j
		}
		insertJobs(t, s, over("pending", "0:u2", domain.JobPending), over("done", "0:u3", domain.JobCompleted),
			over("failed", "0:u4", domain.JobFailed), over("done2", "0:u4", domain.JobCompleted))
		if err := s.UploadTouch(ctx, &store.UploadTouchParams{ID: "0:u6", Now: before}); err != nil {
			t.Fatal(err)
		}
		checkErr(t, "UploadTouch of a missing upload", s.UploadTouch(ctx, &store.UploadTouchParams{ID: "0:none", Now: before}), store.ErrNotFound)
		list := func(after *store.ExpiredCursor) []string {
			t.Helper()
			got, err := s.UploadListExpired(ctx, &store.UploadListExpiredParams{Before: before, After: after, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, u := range got {
				ids = append(ids, u.ID)
				if u.BlobKey != "k-"+u.ID[2:] || !u.CreatedAt.Equal(Epoch()) {
					t.Errorf("UploadListExpired: %+v", u)
				}
			}
			return ids
		}
		// u2: a pending job; u4: a failed job, which may be retried; u5:
		// too recent; u6: used by a job created since.
		checkIDs(t, "UploadListExpired", list(nil), []string{"0:u1", "0:u3"})
		checkIDs(t, "UploadListExpired after u1", list(&store.ExpiredCursor{At: Epoch(), ID: "0:u1"}), []string{"0:u3"})
		for id, want := range map[string]bool{"0:u1": true, "0:u2": false, "0:u4": false, "0:u5": false, "0:u6": false, "0:none": false} {
			got, err := s.UploadDelete(ctx, &store.UploadDeleteParams{ID: id, Before: before})
			if err != nil || got != want {
				t.Errorf("UploadDelete(%s) = %v, %v; want %v", id, got, err, want)
			}
		}
		if got, err := s.UploadDelete(ctx, &store.UploadDeleteParams{ID: "0:u1", Before: before}); err != nil || got {
			t.Errorf("UploadDelete of a deleted upload = %v, %v; want false", got, err)
		}
		_, err := s.UploadGet(ctx, "0:u1")
		checkErr(t, "UploadGet of a deleted upload", err, store.ErrNotFound)
		keys, err := s.UploadListBlobKeys(ctx, []string{"k-u1", "k-u2", "k-u3", "k-none"})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		checkIDs(t, "UploadListBlobKeys", keys, []string{"k-u2", "k-u3"})
	})
}
