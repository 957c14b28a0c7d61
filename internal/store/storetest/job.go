package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// fullJob returns a job with every field set to a value unlike its zero, so a
// column dropped on the way in or out shows in a round trip.
func fullJob(id string) *domain.Job {
	at := Epoch()
	return &domain.Job{
		ID:             id,
		Name:           "full job é",
		Owner:          "ada.lab",
		Workload:       "tanimoto.v2",
		Parameters:     json.RawMessage(`{"b": [1, 2],   "a":"x\u00e9",` + "\n" + `"z": null}`),
		ChunkRows:      12345,
		HasHeader:      true,
		TopK:           77,
		ScoreColumn:    "similarity",
		Order:          domain.Asc,
		MaxAttempts:    5,
		LeaseSeconds:   90,
		TimeoutSeconds: 7200,
		Priority:       -7,
		Status:         domain.JobRunning,
		Error:          "task 0:x.000003 failed: boom",
		RootTaskID:     StitchTaskID(id),
		ChunkCount:     42,
		UploadID:       "0:u-" + id,
		InputHeader:    []byte("id,\"fp\"\n"),
		Columns:        []string{"smiles", `name, "quoted"`, "é"},
		IDColumn:       "mol id",
		NoCache:        true,
		Cached:         17,
		SpeculateAfter: 2.5,
		CacheVersion:   "sha256:ab+1",
		IdempotencyKey: "idem-" + id,
		RequestHash:    strings.Repeat("ab", 32),
		Result:         []byte("id,score\n1,0.5\n\x00\xff\n"),
		ResultSHA256:   strings.Repeat("cd", 32),
		CreatedAt:      at,
		UpdatedAt:      at.Add(1500 * time.Microsecond),
		FinishedAt:     at.Add(time.Hour + time.Microsecond),
	}
}

func exerciseJobs(t *testing.T, newStore newFunc) {
	t.Run("JobInsert", func(t *testing.T) {
		t.Parallel()

		t.Run("RoundTripsEveryField", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := fullJob("j1")
			want := cloneJob(j)
			insertJobs(t, s, j)
			// Pinned: an insert is a write, so it stores Version+1 and
			// reflects it in the struct, like every other write.
			want.Version = 1
			if j.Version != 1 {
				t.Errorf("after JobInsert j.Version = %d, want 1", j.Version)
			}
			// Reads of the job leave the final CSV out, with its size;
			// JobResultRead reads it.
			result := want.Result
			want.Result, want.ResultBytes = nil, int64(len(result))
			if j.ResultBytes != int64(len(result)) {
				t.Errorf("after JobInsert j.ResultBytes = %d, want %d", j.ResultBytes, len(result))
			}
			checkJob(t, "JobGet", getJob(t, s, "j1"), want)
			byKey, err := s.JobGetByIdempotencyKey(t.Context(), "ada.lab", "idem-j1")
			if err != nil {
				t.Fatalf("JobGetByIdempotencyKey: %v", err)
			}
			checkJob(t, "JobGetByIdempotencyKey", byKey, want)
			if got := readResult(t, s, "j1", 5); !bytes.Equal(got, result) {
				t.Errorf("JobResultRead = %q; want %q", got, result)
			}
		})

		t.Run("ZeroFieldsRoundTrip", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := &domain.Job{ID: "z", Parameters: json.RawMessage(`{}`), Status: domain.JobPending, CreatedAt: Epoch(), UpdatedAt: Epoch()}
			want := cloneJob(j)
			insertJobs(t, s, j)
			want.Version = 1
			checkJob(t, "JobGet", getJob(t, s, "z"), want)
		})

		t.Run("NilParametersBecomeEmptyObject", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := NewJob("j1", Epoch())
			j.Parameters = nil
			insertJobs(t, s, j)
			if got := getJob(t, s, "j1").Parameters; string(got) != "{}" {
				t.Errorf("Parameters = %q, want {}", got)
			}
		})

		t.Run("TimesComeBackUTCMicroseconds", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			zone := time.FixedZone("UTC+5", 5*3600)
			at := time.Date(2024, 2, 29, 23, 59, 59, 123456789, zone)
			j := NewJob("j1", at)
			j.UpdatedAt = at.Add(time.Nanosecond * 999)
			insertJobs(t, s, j)
			got := getJob(t, s, "j1")
			for _, c := range []struct {
				name      string
				got, want time.Time
			}{
				{"CreatedAt", got.CreatedAt, at.Truncate(time.Microsecond)},
				{"UpdatedAt", got.UpdatedAt, at.Add(999 * time.Nanosecond).Truncate(time.Microsecond)},
			} {
				if !c.got.Equal(c.want) || c.got.Location() != time.UTC {
					t.Errorf("%s = %s, want %s in UTC", c.name, fmtTime(c.got), fmtTime(c.want))
				}
			}
			if !got.FinishedAt.IsZero() {
				t.Errorf("FinishedAt = %s, want zero", fmtTime(got.FinishedAt))
			}
		})

		t.Run("DuplicateID", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			insertJobs(t, s, NewJob("j1", Epoch()))
			again := NewJob("j1", Epoch().Add(time.Second))
			again.Name = "second"
			checkErr(t, "JobInsert of a taken ID", s.JobInsert(t.Context(), again), store.ErrDuplicate)
			if got := getJob(t, s, "j1"); got.Name != "job j1" {
				t.Errorf("the first job was overwritten: Name = %q", got.Name)
			}
		})

		t.Run("DuplicateIdempotencyKey", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			a := NewJob("a", Epoch())
			a.IdempotencyKey = "key-1"
			insertJobs(t, s, a)
			b := NewJob("b", Epoch())
			b.IdempotencyKey = "key-1"
			checkErr(t, "JobInsert of a taken idempotency key", s.JobInsert(t.Context(), b), store.ErrDuplicate)
			_, err := s.JobGet(t.Context(), "b")
			checkErr(t, "JobGet of the refused job", err, store.ErrNotFound)
		})

		// Concurrent inserts of one key: one wins, and a refused one can
		// read the winner at once, outside any transaction (the refusal
		// comes only once the write it collided with is committed).
		t.Run("ConcurrentIdempotencyKey", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			var wg sync.WaitGroup
			var won atomic.Int32
			// A transaction held open first, so that on a store with one
			// writer the inserts queue behind it and run together.
			release := make(chan struct{})
			held := make(chan struct{})
			wg.Go(func() {
				err := s.InTx(ctx, func(q store.Querier) error {
					close(held)
					<-release
					return nil
				})
				if err != nil {
					t.Errorf("the transaction held open: %v", err)
				}
			})
			<-held
			for i := range 16 {
				wg.Go(func() {
					j := NewJob(fmt.Sprintf("j%d", i), Epoch())
					j.IdempotencyKey = "key-1"
					err := s.InTx(ctx, func(q store.Querier) error { return q.JobInsert(ctx, j) })
					if err == nil {
						won.Add(1)
						return
					}
					if !errors.Is(err, store.ErrDuplicate) {
						t.Errorf("JobInsert %d: %v, want nil or ErrDuplicate", i, err)
						return
					}
					if got, err := s.JobGetByIdempotencyKey(ctx, j.Owner, "key-1"); err != nil || got.ID == j.ID {
						t.Errorf("JobGetByIdempotencyKey after a refused insert = %v, %v; want the winner", got, err)
					}
				})
			}
			time.Sleep(50 * time.Millisecond)
			close(release)
			wg.Wait()
			if won.Load() != 1 {
				t.Errorf("%d inserts of one key won, want 1", won.Load())
			}
		})

		// An idempotency key is its owner's: another account's job with the
		// same key is another job, and is not found by the key.
		t.Run("IdempotencyKeysAreTheOwners", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			a, b := NewJob("a", Epoch()), NewJob("b", Epoch())
			a.Owner, b.Owner = "ada", "bob"
			a.IdempotencyKey, b.IdempotencyKey = "same", "same"
			insertJobs(t, s, a, b)
			for _, j := range []*domain.Job{a, b} {
				got, err := s.JobGetByIdempotencyKey(t.Context(), j.Owner, "same")
				if err != nil || got.ID != j.ID {
					t.Errorf("JobGetByIdempotencyKey(%s, same) = %v, %v; want job %s", j.Owner, got, err, j.ID)
				}
			}
			_, err := s.JobGetByIdempotencyKey(t.Context(), "carol", "same")
			checkErr(t, "JobGetByIdempotencyKey(carol, same)", err, store.ErrNotFound)
			c := NewJob("c", Epoch())
			c.Owner, c.IdempotencyKey = "ada", "same"
			err = s.InTx(t.Context(), func(q store.Querier) error { return q.JobInsert(t.Context(), c) })
			checkErr(t, "JobInsert of ada's taken key", err, store.ErrDuplicate)
		})

		// Pinned: an empty IdempotencyKey means "none", so any number of
		// jobs may have one, and no job is found by the empty key.
		t.Run("EmptyIdempotencyKeysDoNotCollide", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			insertJobs(t, s, NewJob("a", Epoch()), NewJob("b", Epoch()), NewJob("c", Epoch()))
			_, err := s.JobGetByIdempotencyKey(t.Context(), domain.AdminAccount, "")
			checkErr(t, "JobGetByIdempotencyKey(\"\")", err, store.ErrNotFound)
		})
	})

	t.Run("JobGet", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertJobs(t, s, NewJob("j1", Epoch()))
		_, err := s.JobGet(t.Context(), "missing")
		checkErr(t, "JobGet(missing)", err, store.ErrNotFound)
		_, err = s.JobGetByIdempotencyKey(t.Context(), domain.AdminAccount, "missing")
		checkErr(t, "JobGetByIdempotencyKey(missing)", err, store.ErrNotFound)
	})

	t.Run("JobUpdate", func(t *testing.T) {
		t.Parallel()

		t.Run("WritesMutableFieldsAndBumpsVersion", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			insertJobs(t, s, NewJob("j1", Epoch()))
			j := getJob(t, s, "j1")
			orig := cloneJob(j)
			now := Epoch().Add(time.Minute)
			j.Status = domain.JobCompleted
			j.Error = "why"
			j.Result = []byte("id,score\n7,0.9\n")
			j.ResultSHA256 = strings.Repeat("ee", 32)
			j.UpdatedAt = now
			j.FinishedAt = now
			j.Name = "renamed" // not a mutable field: must not be written
			if err := s.JobUpdate(t.Context(), j); err != nil {
				t.Fatalf("JobUpdate: %v", err)
			}
			if j.Version != orig.Version+1 {
				t.Errorf("j.Version = %d after JobUpdate, want %d", j.Version, orig.Version+1)
			}
			want := cloneJob(j)
			want.Name = orig.Name
			want.Result = nil // read by JobResultRead alone
			if j.ResultBytes != 15 {
				t.Errorf("j.ResultBytes = %d after JobUpdate with a result of 15 bytes", j.ResultBytes)
			}
			checkJob(t, "JobGet after JobUpdate", getJob(t, s, "j1"), want)
			if got := readResult(t, s, "j1", 1<<20); string(got) != "id,score\n7,0.9\n" {
				t.Errorf("JobResultRead after JobUpdate = %q", got)
			}

			// Clearing fields writes NULLs that read back as zero values.
			j = getJob(t, s, "j1")
			j.Status = domain.JobRunning
			j.Error, j.Result, j.ResultSHA256, j.FinishedAt = "", nil, "", time.Time{}
			if err := s.JobUpdate(t.Context(), j); err != nil {
				t.Fatalf("JobUpdate clearing fields: %v", err)
			}
			if j.Version != orig.Version+2 {
				t.Errorf("j.Version = %d after the second JobUpdate, want %d", j.Version, orig.Version+2)
			}
			checkJob(t, "JobGet after clearing", getJob(t, s, "j1"), j)
			// A nil Result (as every read leaves it) keeps the stored one.
			if got := readResult(t, s, "j1", 1<<20); string(got) != "id,score\n7,0.9\n" {
				t.Errorf("JobResultRead after an update with a nil Result = %q; want it kept", got)
			}
		})

		t.Run("StaleVersion", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			insertJobs(t, s, NewJob("j1", Epoch()))
			first, second := getJob(t, s, "j1"), getJob(t, s, "j1")
			first.Status = domain.JobRunning
			if err := s.JobUpdate(t.Context(), first); err != nil {
				t.Fatalf("JobUpdate: %v", err)
			}
			stored := getJob(t, s, "j1")
			for _, v := range []int64{second.Version, stored.Version + 1, 0} {
				stale := cloneJob(second)
				stale.Version = v
				stale.Status = domain.JobCancelled
				checkErr(t, "JobUpdate with a stale version", s.JobUpdate(t.Context(), stale), store.ErrStale)
				if stale.Version != v {
					t.Errorf("a refused JobUpdate changed the struct's version from %d to %d", v, stale.Version)
				}
				checkJob(t, "the row after a stale JobUpdate", getJob(t, s, "j1"), stored)
			}
		})

		t.Run("Missing", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := NewJob("ghost", Epoch())
			j.Version = 1
			err := s.JobUpdate(t.Context(), j)
			checkErr(t, "JobUpdate of a missing job", err, store.ErrNotFound)
		})
	})

	t.Run("TaskCountByJob", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j, other := NewJob("j1", Epoch()), NewJob("j2", Epoch())
		insertJobs(t, s, j, other)
		tasks := NewTasks(j, 8)
		states := []domain.TaskState{domain.TaskPending, domain.TaskPending, domain.TaskLeased, domain.TaskCompleted,
			domain.TaskCompleted, domain.TaskFailed, domain.TaskCancelled, domain.TaskWaiting}
		for i, st := range states {
			tasks[i+1].State = st
		}
		tasks[0].State = domain.TaskPending // the stitch task: not a chunk, not counted
		insertTasks(t, s, tasks...)
		insertTasks(t, s, NewTasks(other, 3)...)
		j3 := NewJob("j3", Epoch()) // a job whose tasks are all done
		insertJobs(t, s, j3)
		t3 := NewTasks(j3, 2)
		t3[1].State, t3[2].State = domain.TaskCompleted, domain.TaskCompleted
		insertTasks(t, s, t3...)
		got, err := s.TaskCountByJob(ctx, []string{"j1", "missing", "j2", "j3"})
		if err != nil {
			t.Fatalf("TaskCountByJob: %v", err)
		}
		want := map[string]domain.TaskCounts{
			"j1": {Total: 8, Waiting: 1, Pending: 2, Leased: 1, Completed: 2, Failed: 1, Cancelled: 1},
			"j2": {Total: 3, Pending: 3},
			"j3": {Total: 2, Completed: 2},
		}
		// Pinned: a job without tasks (or no such job) is absent.
		if !reflect.DeepEqual(got, want) {
			t.Errorf("TaskCountByJob = %+v, want %+v", got, want)
		}
		if got, err := s.TaskCountByJob(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("TaskCountByJob(no job) = %+v, %v; want none, nil", got, err)
		}
	})
}

func exerciseJobList(t *testing.T, newStore newFunc) {
	s := newStore(t)
	at := Epoch()
	mk := func(id string, created time.Time, st domain.JobStatus) *domain.Job {
		j := NewJob(id, created)
		j.Status = st
		return j
	}
	// Newest first: created descending, then ID descending among equals.
	jobs := []*domain.Job{
		mk("a", at, domain.JobPending),
		mk("b", at, domain.JobRunning),
		mk("c", at.Add(time.Second), domain.JobPending),
		mk("d", at.Add(2*time.Second), domain.JobCompleted),
		mk("e", at.Add(-time.Second), domain.JobPending),
		mk("f", at.Add(time.Microsecond), domain.JobPending),
	}
	insertJobs(t, s, jobs...)
	all := []string{"d", "c", "f", "b", "a", "e"}

	list := func(p *store.JobListParams) []*domain.Job {
		t.Helper()
		got, err := s.JobList(t.Context(), p)
		if err != nil {
			t.Fatalf("JobList(%+v): %v", p, err)
		}
		return got
	}
	cursor := func(j *domain.Job) *store.JobCursor { return &store.JobCursor{CreatedAt: j.CreatedAt, ID: j.ID} }

	t.Run("Order", func(t *testing.T) {
		got := list(&store.JobListParams{Limit: 100})
		checkIDs(t, "JobList", jobIDs(got), all)
		if len(got) > 0 {
			want := cloneJob(jobs[3])
			checkJob(t, "JobList's first job", got[0], want)
		}
	})

	t.Run("Paging", func(t *testing.T) {
		var seen []string
		var after *store.JobCursor
		for page := 0; page < 10; page++ {
			got := list(&store.JobListParams{Limit: 2, After: after})
			if len(got) > 2 {
				t.Fatalf("page %d has %d jobs, limit 2", page, len(got))
			}
			if len(got) == 0 {
				break
			}
			seen = append(seen, jobIDs(got)...)
			after = cursor(got[len(got)-1])
		}
		checkIDs(t, "paged JobList", seen, all)
	})

	t.Run("CursorOnTie", func(t *testing.T) {
		// "b" and "a" share CreatedAt: after "b" comes "a", then "e".
		got := list(&store.JobListParams{Limit: 100, After: &store.JobCursor{CreatedAt: at, ID: "b"}})
		checkIDs(t, "JobList after b", jobIDs(got), []string{"a", "e"})
		// A cursor need not name an existing job.
		got = list(&store.JobListParams{Limit: 100, After: &store.JobCursor{CreatedAt: at, ID: "ab"}})
		checkIDs(t, "JobList after (at, ab)", jobIDs(got), []string{"a", "e"})
	})

	t.Run("StatusFilter", func(t *testing.T) {
		got := list(&store.JobListParams{Status: domain.JobPending, Limit: 100})
		checkIDs(t, "JobList pending", jobIDs(got), []string{"c", "f", "a", "e"})
		got = list(&store.JobListParams{Status: domain.JobPending, Limit: 2, After: cursor(jobs[2])})
		checkIDs(t, "JobList pending after c", jobIDs(got), []string{"f", "a"})
		got = list(&store.JobListParams{Status: domain.JobCancelled, Limit: 100})
		checkIDs(t, "JobList cancelled", jobIDs(got), nil)
	})

	t.Run("OwnerFilter", func(t *testing.T) {
		s := newStore(t)
		owned := func(id, owner string, created time.Time, st domain.JobStatus) *domain.Job {
			j := mk(id, created, st)
			j.Owner = owner
			return j
		}
		insertJobs(t, s,
			owned("a1", "ada", at, domain.JobPending), owned("b1", "bob", at.Add(time.Second), domain.JobPending),
			owned("a2", "ada", at.Add(2*time.Second), domain.JobRunning), owned("a3", "ada", at.Add(3*time.Second), domain.JobPending))
		list := func(p *store.JobListParams) []string {
			t.Helper()
			got, err := s.JobList(t.Context(), p)
			if err != nil {
				t.Fatalf("JobList(%+v): %v", p, err)
			}
			return jobIDs(got)
		}
		checkIDs(t, "JobList of ada", list(&store.JobListParams{Owner: "ada", Limit: 100}), []string{"a3", "a2", "a1"})
		checkIDs(t, "JobList of bob", list(&store.JobListParams{Owner: "bob", Limit: 100}), []string{"b1"})
		checkIDs(t, "JobList of nobody", list(&store.JobListParams{Owner: "carol", Limit: 100}), nil)
		checkIDs(t, "JobList of everyone", list(&store.JobListParams{Limit: 100}), []string{"a3", "a2", "b1", "a1"})
		checkIDs(t, "JobList of ada, pending", list(&store.JobListParams{Owner: "ada", Status: domain.JobPending, Limit: 100}), []string{"a3", "a1"})
		after := &store.JobCursor{CreatedAt: at.Add(3 * time.Second), ID: "a3"}
		checkIDs(t, "JobList of ada after a3", list(&store.JobListParams{Owner: "ada", Limit: 1, After: after}), []string{"a2"})
		checkIDs(t, "JobList of ada, pending, after a3", list(&store.JobListParams{Owner: "ada", Status: domain.JobPending, Limit: 100, After: after}), []string{"a1"})
	})
}
