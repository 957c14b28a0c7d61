package storetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// fullTask returns a task with every field set to a value unlike its zero.
func fullTask(id string) *domain.Task {
	at := Epoch()
	return &domain.Task{
		ID:               id,
		JobID:            "job-1",
		Owner:            "ada.lab",
		Kind:             domain.KindTree,
		Workload:         "tanimoto.v2",
		ChunkIndex:       17,
		State:            domain.TaskLeased,
		Attempt:          2,
		MaxAttempts:      4,
		LeaseSeconds:     45,
		LeaseOwner:       "worker-7",
		LeaseExpiresAt:   at.Add(45 * time.Second),
		TimeoutSeconds:   300,
		AttemptDeadline:  at.Add(4*time.Minute + time.Microsecond),
		LeasedAt:         at.Add(-time.Minute),
		RunAfter:         at.Add(time.Second), // in backoff: a RunAfter not after UpdatedAt is stored as none
		Priority:         12,
		JobCreatedAt:     at.Add(-time.Hour),
		InputURI:         "blob:chunks/job-1/17.csv",
		InputSHA256:      strings.Repeat("9a", 32),
		InputBytes:       1 << 40,
		InputOffset:      1<<40 - 12345,
		InputLength:      1 << 35,
		Result:           []byte("id,score\n3,1e-3\n\x00\xfe"),
		Metrics:          json.RawMessage(`{"rows": 10,"secs":1.5 }`),
		Error:            "attempt 1: out of memory",
		DownstreamID:     "1:other-shard.stitch",
		PendingUpstreams: 3,
		CreatedAt:        at.Add(-time.Hour),
		UpdatedAt:        at,
		FinishedAt:       at.Add(time.Microsecond),
		Ballots: []domain.Ballot{
			{N: 3, State: domain.TaskCompleted, Attempt: 1, LeaseOwner: "ada/k@w-1", LeasedAt: at.Add(-2 * time.Minute),
				Voters: ",bob,", Result: []byte("id,score\n3,1e-3\n\x00\xfe"), Metrics: json.RawMessage(`{"rows":10}`),
				CreatedAt: at.Add(-3 * time.Minute), UpdatedAt: at.Add(-time.Minute), FinishedAt: at.Add(-time.Minute)},
			{N: 4, State: domain.TaskLeased, Attempt: 1, LeaseOwner: "bob/k@w-2", LeasedAt: at.Add(-time.Minute + time.Microsecond),
				LeaseExpiresAt: at.Add(45 * time.Second), AttemptDeadline: at.Add(4 * time.Minute), Voters: ",ada,",
				Error: "an earlier \"error\"", CreatedAt: at.Add(-3 * time.Minute), UpdatedAt: at},
		},
		Second: &domain.SecondLease{Owner: "worker-\"3\"", Attempt: 1, LeasedAt: at.Add(-2*time.Minute + time.Microsecond),
			ExpiresAt: at.Add(30 * time.Second), Deadline: at.Add(3 * time.Minute)},
	}
}

func exerciseTasks(t *testing.T, newStore newFunc) {
	t.Run("TaskInsert", func(t *testing.T) {
		t.Parallel()

		t.Run("RoundTripsEveryField", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			full := fullTask("t1")
			// A tree task of no job, with every optional field at its zero:
			// Metrics stays nil, times stay zero.
			bare := &domain.Task{ID: "t2", Kind: domain.KindTree, Workload: "w", State: domain.TaskWaiting,
				CreatedAt: Epoch(), UpdatedAt: Epoch()}
			want := []*domain.Task{cloneTask(full), cloneTask(bare)}
			insertTasks(t, s, full, bare)
			for i, tk := range []*domain.Task{full, bare} {
				// Pinned: an insert stores Version+1 and reflects it.
				if tk.Version != 1 {
					t.Errorf("after TaskInsert %s.Version = %d, want 1", tk.ID, tk.Version)
				}
				want[i].Version = 1
				checkTask(t, "TaskGet", getTask(t, s, tk.ID), want[i])
			}
			if got := getTask(t, s, "t2"); got.Metrics != nil {
				t.Errorf("nil Metrics came back as %q", got.Metrics)
			}
		})

		t.Run("TimesComeBackUTCMicroseconds", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			zone := time.FixedZone("UTC-3", -3*3600)
			at := time.Date(2023, 12, 31, 21, 30, 0, 987654321, zone)
			tk := fullTask("t1")
			tk.LeaseExpiresAt, tk.RunAfter, tk.JobCreatedAt, tk.CreatedAt, tk.UpdatedAt, tk.FinishedAt = at, at, at, at, at, time.Time{}
			tk.AttemptDeadline, tk.LeasedAt = at, at
			tk.RunAfter = at.Add(time.Second) // in backoff, so stored
			insertTasks(t, s, tk)
			got := getTask(t, s, "t1")
			want := at.Truncate(time.Microsecond)
			for name, v := range map[string]time.Time{"LeaseExpiresAt": got.LeaseExpiresAt, "RunAfter": got.RunAfter.Add(-time.Second),
				"JobCreatedAt": got.JobCreatedAt, "CreatedAt": got.CreatedAt, "UpdatedAt": got.UpdatedAt,
				"AttemptDeadline": got.AttemptDeadline, "LeasedAt": got.LeasedAt} {
				if !v.Equal(want) || v.Location() != time.UTC {
					t.Errorf("%s = %s, want %s in UTC", name, fmtTime(v), fmtTime(want))
				}
			}
			if !got.FinishedAt.IsZero() {
				t.Errorf("FinishedAt = %s, want zero", fmtTime(got.FinishedAt))
			}
		})

		t.Run("Empty", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			if err := s.TaskInsert(t.Context(), nil); err != nil {
				t.Errorf("TaskInsert(nil): %v", err)
			}
		})

		t.Run("ManyTasks", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := NewJob("j1", Epoch())
			insertJobs(t, s, j)
			const n = 600 // several batches of any likely batch size, and a remainder
			insertTasks(t, s, NewTasks(j, n)...)
			got, err := s.TaskList(t.Context(), &store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: n + 10, AfterIndex: -1})
			if err != nil {
				t.Fatalf("TaskList: %v", err)
			}
			if len(got) != n {
				t.Fatalf("TaskList returned %d tasks, want %d", len(got), n)
			}
			for i, tk := range got {
				if tk.ChunkIndex != i || tk.ID != ChunkTaskID("j1", i) || tk.Version != 1 {
					t.Fatalf("task %d is %s (index %d, version %d)", i, tk.ID, tk.ChunkIndex, tk.Version)
				}
			}
		})

		t.Run("DuplicateIsAllOrNone", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			first := fullTask("t1")
			insertTasks(t, s, first)
			stored := getTask(t, s, "t1")

			batch := []*domain.Task{fullTask("t2"), fullTask("t3"), fullTask("t1")}
			batch[2].Error = "the second t1"
			checkErr(t, "TaskInsert with a taken ID", s.TaskInsert(ctx, batch), store.ErrDuplicate)
			for _, id := range []string{"t2", "t3"} {
				_, err := s.TaskGet(ctx, id)
				checkErr(t, "TaskGet of a task from a refused batch", err, store.ErrNotFound)
			}
			checkTask(t, "the first t1", getTask(t, s, "t1"), stored)

			// A batch that repeats an ID of its own is refused whole too.
			checkErr(t, "TaskInsert repeating an ID", s.TaskInsert(ctx, []*domain.Task{fullTask("t4"), fullTask("t5"), fullTask("t4")}), store.ErrDuplicate)
			for _, id := range []string{"t4", "t5"} {
				_, err := s.TaskGet(ctx, id)
				checkErr(t, "TaskGet of a task from a refused batch", err, store.ErrNotFound)
			}
		})

		// Inside a transaction too, which stays usable after a refused
		// batch; every field of a task comes back.
		t.Run("InTransaction", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			insertTasks(t, s, fullTask("t1"))
			full := fullTask("t4")
			err := s.InTx(ctx, func(q store.Querier) error {
				checkErr(t, "TaskInsert with a taken ID", q.TaskInsert(ctx, []*domain.Task{fullTask("t2"), fullTask("t1")}), store.ErrDuplicate)
				checkErr(t, "TaskInsert repeating an ID", q.TaskInsert(ctx, []*domain.Task{fullTask("t3"), fullTask("t3")}), store.ErrDuplicate)
				return q.TaskInsert(ctx, []*domain.Task{full})
			})
			if err != nil {
				t.Fatalf("the transaction after refused batches: %v", err)
			}
			for _, id := range []string{"t2", "t3"} {
				_, err := s.TaskGet(ctx, id)
				checkErr(t, "TaskGet of a task from a refused batch", err, store.ErrNotFound)
			}
			want := fullTask("t4")
			want.Version = 1
			checkTask(t, "TaskGet of a task inserted in a transaction", getTask(t, s, "t4"), want)
		})
	})

	t.Run("TaskGet", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertTasks(t, s, fullTask("t1"))
		_, err := s.TaskGet(t.Context(), "missing")
		checkErr(t, "TaskGet(missing)", err, store.ErrNotFound)
	})

	t.Run("TaskGetMany", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertTasks(t, s, fullTask("t1"), fullTask("t2"), fullTask("t3"))
		got, err := s.TaskGetMany(t.Context(), []string{"t3", "missing", "t1", "t3"})
		if err != nil {
			t.Fatalf("TaskGetMany: %v", err)
		}
		checkIDs(t, "TaskGetMany", sortedIDs(got), []string{"t1", "t3"})
		for _, tk := range got {
			checkTask(t, "TaskGetMany "+tk.ID, tk, getTask(t, s, tk.ID)) // every field, the result included
		}
		if got, err := s.TaskGetMany(t.Context(), nil); err != nil || len(got) != 0 {
			t.Errorf("TaskGetMany(none) = %v, %v; want nothing", got, err)
		}
	})

	t.Run("TaskUpdateMany", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		j := NewJob("j1", Epoch())
		insertTasks(t, s, NewTasks(j, 3)...)
		read := func() []*domain.Task {
			var out []*domain.Task
			for i := range 3 {
				out = append(out, getTask(t, s, ChunkTaskID("j1", i)))
			}
			return out
		}
		tasks := read()
		now := Epoch().Add(time.Minute)
		for i, tk := range tasks {
			tk.State, tk.Error, tk.UpdatedAt = domain.TaskFailed, fmt.Sprintf("error %d", i), now
		}
		tasks[1].Ballots, tasks[1].Voters = fullTask("x").Ballots, ",ada," // a chunk being voted on
		want := make([]*domain.Task, len(tasks))
		if err := s.TaskUpdateMany(ctx, tasks); err != nil {
			t.Fatalf("TaskUpdateMany: %v", err)
		}
		for i, tk := range tasks {
			if tk.Version != 2 {
				t.Errorf("%s.Version = %d after TaskUpdateMany, want 2", tk.ID, tk.Version)
			}
			want[i] = cloneTask(tk)
			checkTask(t, "after TaskUpdateMany", getTask(t, s, tk.ID), want[i])
		}
		// One stale in the middle: ErrStale, and in a transaction nothing
		// of it stays.
		tasks = read()
		tasks[1].Version--
		err := s.InTx(ctx, func(q store.Querier) error {
			for _, tk := range tasks {
				tk.Error = "second round"
			}
			return q.TaskUpdateMany(ctx, tasks)
		})
		checkErr(t, "TaskUpdateMany with a stale task", err, store.ErrStale)
		for i := range tasks {
			checkTask(t, "after a refused TaskUpdateMany", getTask(t, s, ChunkTaskID("j1", i)), want[i])
		}
		gone := cloneTask(tasks[0])
		gone.ID = "missing"
		checkErr(t, "TaskUpdateMany of a missing task", s.TaskUpdateMany(ctx, []*domain.Task{read()[0], gone}), store.ErrNotFound)
		if err := s.TaskUpdateMany(ctx, nil); err != nil {
			t.Errorf("TaskUpdateMany(none): %v", err)
		}
	})

	t.Run("TaskList", func(t *testing.T) { t.Parallel(); exerciseTaskList(t, newStore) })

	t.Run("TaskUpdate", func(t *testing.T) {
		t.Parallel()

		t.Run("WritesMutableFieldsAndBumpsVersion", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			j := NewJob("j1", Epoch())
			insertTasks(t, s, NewTasks(j, 1)...)
			tk := getTask(t, s, ChunkTaskID("j1", 0))
			orig := cloneTask(tk)
			now := Epoch().Add(time.Minute)
			tk.State = domain.TaskCompleted
			tk.Attempt = 3
			tk.MaxAttempts = 7 // a release's bump, a retry's fresh budget
			tk.LeaseOwner = "w-1"
			tk.LeaseExpiresAt = now.Add(time.Minute)
			tk.RunAfter = now.Add(-time.Second)
			tk.Result = []byte("a,b\n1,2\n")
			tk.Metrics = json.RawMessage(`{"secs": 2}`)
			tk.Error = "earlier attempt failed"
			tk.PendingUpstreams = 9
			tk.UpdatedAt = now
			tk.FinishedAt = now.Add(time.Microsecond)
			tk.Ballots, tk.Voters = fullTask("x").Ballots[1:], ",bob,"
			tk.Ballots[0].State, tk.Ballots[0].LeaseExpiresAt = domain.TaskFailed, time.Time{}
			// Not mutable fields: must not be written. The attempt's
			// deadline and lease time are, as a lease made in the engine
			// sets them.
			tk.InputURI, tk.Priority, tk.Workload, tk.DownstreamID = "blob:other", 99, "other", "elsewhere"
			tk.TimeoutSeconds, tk.AttemptDeadline, tk.LeasedAt = 77, now.Add(time.Hour), now
			if err := s.TaskUpdate(t.Context(), tk); err != nil {
				t.Fatalf("TaskUpdate: %v", err)
			}
			if tk.Version != orig.Version+1 {
				t.Errorf("tk.Version = %d after TaskUpdate, want %d", tk.Version, orig.Version+1)
			}
			want := cloneTask(tk)
			want.InputURI, want.Priority, want.Workload, want.DownstreamID = orig.InputURI, orig.Priority, orig.Workload, orig.DownstreamID
			want.TimeoutSeconds = orig.TimeoutSeconds
			checkTask(t, "TaskGet after TaskUpdate", getTask(t, s, tk.ID), want)

			// Clearing fields writes NULLs that read back as zero values.
			tk = getTask(t, s, tk.ID)
			tk.State = domain.TaskPending
			tk.LeaseOwner, tk.LeaseExpiresAt, tk.Result, tk.Metrics, tk.Error, tk.FinishedAt = "", time.Time{}, nil, nil, "", time.Time{}
			tk.Ballots, tk.Voters = nil, ""
			if err := s.TaskUpdate(t.Context(), tk); err != nil {
				t.Fatalf("TaskUpdate clearing fields: %v", err)
			}
			got := getTask(t, s, tk.ID)
			// A nil Result (as lists leave it) keeps the stored one.
			tk.Result = want.Result
			checkTask(t, "TaskGet after clearing", got, tk)
			if got.Metrics != nil {
				t.Errorf("Metrics cleared to nil came back as %q", got.Metrics)
			}
			if got.Version != orig.Version+2 {
				t.Errorf("Version = %d after two updates, want %d", got.Version, orig.Version+2)
			}
		})

		t.Run("StaleVersion", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			insertTasks(t, s, fullTask("t1"))
			first, second := getTask(t, s, "t1"), getTask(t, s, "t1")
			first.Error = "first"
			if err := s.TaskUpdate(t.Context(), first); err != nil {
				t.Fatalf("TaskUpdate: %v", err)
			}
			stored := getTask(t, s, "t1")
			for _, v := range []int64{second.Version, stored.Version + 1, 0} {
				stale := cloneTask(second)
				stale.Version = v
				stale.State = domain.TaskFailed
				checkErr(t, "TaskUpdate with a stale version", s.TaskUpdate(t.Context(), stale), store.ErrStale)
				if stale.Version != v {
					t.Errorf("a refused TaskUpdate changed the struct's version from %d to %d", v, stale.Version)
				}
				checkTask(t, "the row after a stale TaskUpdate", getTask(t, s, "t1"), stored)
			}
		})

		t.Run("Missing", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			tk := fullTask("ghost")
			tk.Version = 1
			checkErr(t, "TaskUpdate of a missing task", s.TaskUpdate(t.Context(), tk), store.ErrNotFound)
		})
	})
}

func exerciseTaskList(t *testing.T, newStore newFunc) {
	s := newStore(t)
	j, other := NewJob("j1", Epoch()), NewJob("j2", Epoch())
	tasks := NewTasks(j, 10)
	for i, tk := range tasks[1:] {
		if i%3 == 0 {
			tk.State = domain.TaskCompleted
		}
	}
	// Insert out of order: the list orders by ChunkIndex, not by insertion.
	shuffled := []*domain.Task{tasks[7], tasks[3], tasks[0], tasks[10], tasks[1], tasks[5], tasks[9], tasks[2], tasks[8], tasks[4], tasks[6]}
	want := make(map[string]*domain.Task, len(tasks))
	for _, tk := range tasks {
		want[tk.ID] = cloneTask(tk)
		want[tk.ID].Version = 1
	}
	insertTasks(t, s, shuffled...)
	insertTasks(t, s, NewTasks(other, 4)...)

	list := func(p store.TaskListParams) []string {
		t.Helper()
		got, err := s.TaskList(t.Context(), &p)
		if err != nil {
			t.Fatalf("TaskList(%+v): %v", p, err)
		}
		for _, tk := range got {
			if w := want[tk.ID]; w != nil {
				checkTask(t, "TaskList", tk, w)
			} else {
				t.Errorf("TaskList(%+v) returned %s of another job", p, tk.ID)
			}
		}
		return taskIDs(got)
	}
	chunks := func(idx ...int) []string {
		out := make([]string, len(idx))
		for i, x := range idx {
			out[i] = ChunkTaskID("j1", x)
		}
		return out
	}

	t.Run("AllByIndex", func(t *testing.T) {
		got := list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 100, AfterIndex: -1})
		checkIDs(t, "chunks", got, chunks(0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	})
	t.Run("Paging", func(t *testing.T) {
		checkIDs(t, "first page", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 3, AfterIndex: -1}), chunks(0, 1, 2))
		checkIDs(t, "after 2", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 3, AfterIndex: 2}), chunks(3, 4, 5))
		checkIDs(t, "after 8", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 3, AfterIndex: 8}), chunks(9))
		checkIDs(t, "after 9", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, Limit: 3, AfterIndex: 9}), nil)
	})
	t.Run("StateFilter", func(t *testing.T) {
		checkIDs(t, "completed", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, State: domain.TaskCompleted, Limit: 100, AfterIndex: -1}), chunks(0, 3, 6, 9))
		checkIDs(t, "completed after 3", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, State: domain.TaskCompleted, Limit: 2, AfterIndex: 3}), chunks(6, 9))
		checkIDs(t, "pending, limit 2", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, State: domain.TaskPending, Limit: 2, AfterIndex: -1}), chunks(1, 2))
		checkIDs(t, "failed", list(store.TaskListParams{JobID: "j1", Kind: domain.KindChunk, State: domain.TaskFailed, Limit: 100, AfterIndex: -1}), nil)
	})
	// Pinned: AfterIndex -1 or less means "from the start", so it does not
	// skip the stitch task, whose ChunkIndex is -1.
	t.Run("StitchKind", func(t *testing.T) {
		for _, after := range []int{-1, -5} {
			got := list(store.TaskListParams{JobID: "j1", Kind: domain.KindStitch, Limit: 100, AfterIndex: after})
			checkIDs(t, fmt.Sprintf("stitch after %d", after), got, []string{StitchTaskID("j1")})
		}
	})
	t.Run("NoSuchJob", func(t *testing.T) {
		checkIDs(t, "missing job", list(store.TaskListParams{JobID: "missing", Kind: domain.KindChunk, Limit: 100, AfterIndex: -1}), nil)
		checkIDs(t, "tree kind", list(store.TaskListParams{JobID: "j1", Kind: domain.KindTree, Limit: 100, AfterIndex: -1}), nil)
	})
}

// exerciseTaskLockMany: TaskLockMany returns the tasks that exist as
// TaskGet does, inside a transaction too, and passes over IDs that are
// not there; TaskLockVersions returns their versions. (That a lock holds other transactions back is for the
// engine's tests on PostgreSQL: TestVotesAcrossCoordinators.)
func exerciseTaskLockMany(t *testing.T, newStore newFunc) {
	s := newStore(t)
	insertTasks(t, s, fullTask("t1"), fullTask("t2"))
	err := s.InTx(t.Context(), func(q store.Querier) error {
		got, err := q.TaskLockMany(t.Context(), []string{"t2", "missing", "t1"})
		if err != nil {
			return err
		}
		slices.SortFunc(got, func(a, b *domain.Task) int { return strings.Compare(a.ID, b.ID) })
		if len(got) != 2 {
			t.Fatalf("TaskLockMany(t2, missing, t1) = %d tasks, want 2", len(got))
		}
		checkTask(t, "TaskLockMany t1", got[0], getTask(t, s, "t1"))
		checkTask(t, "TaskLockMany t2", got[1], getTask(t, s, "t2"))
		none, err := q.TaskLockMany(t.Context(), nil)
		if err != nil || len(none) != 0 {
			t.Errorf("TaskLockMany(nil) = %v, %v; want nothing", none, err)
		}
		versions, err := q.TaskLockVersions(t.Context(), []string{"t2", "missing", "t1"})
		if err != nil {
			return err
		}
		want := map[string]int64{"t1": getTask(t, s, "t1").Version, "t2": getTask(t, s, "t2").Version}
		if !maps.Equal(versions, want) {
			t.Errorf("TaskLockVersions(t2, missing, t1) = %v, want %v", versions, want)
		}
		if none, err := q.TaskLockVersions(t.Context(), nil); err != nil || len(none) != 0 {
			t.Errorf("TaskLockVersions(nil) = %v, %v; want nothing", none, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
