package storetest

import (
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

// treeTask returns a tree task of the tree jobID (empty: of no tree) in state
// st, created at createdAt. It is the tree's root when id equals jobID.
func treeTask(id, jobID string, st domain.TaskState, createdAt time.Time) *domain.Task {
	return &domain.Task{
		ID:           id,
		JobID:        jobID,
		Kind:         domain.KindTree,
		Workload:     "scimesh.tree",
		State:        st,
		MaxAttempts:  3,
		LeaseSeconds: 60,
		RunAfter:     createdAt,
		JobCreatedAt: createdAt,
		CreatedAt:    createdAt,
		UpdatedAt:    createdAt,
	}
}

// finish puts tk in the final state st at at.
func finish(tk *domain.Task, st domain.TaskState, at time.Time) {
	tk.State, tk.FinishedAt, tk.UpdatedAt = st, at, at
}

// finishTimes reads a job's completion times through TaskCountFinished with
// one-second buckets from Epoch(): every chunk completed in a bucket comes
// back as the bucket's start, earliest first.
func finishTimes(t *testing.T, q store.Querier, jobID string) []time.Time {
	t.Helper()
	counts, err := q.TaskCountFinished(t.Context(), &store.TaskCountFinishedParams{JobID: jobID, Start: Epoch(), Width: time.Second, Buckets: 60})
	if err != nil {
		t.Fatalf("TaskCountFinished(%s): %v", jobID, err)
	}
	if len(counts) != 60 {
		t.Fatalf("TaskCountFinished(%s) returned %d buckets, want 60", jobID, len(counts))
	}
	var got []time.Time
	for i, n := range counts {
		for range n {
			got = append(got, Epoch().Add(time.Duration(i)*time.Second))
		}
	}
	return got
}

// checkTimes checks that got are the instants want, in UTC.
func checkTimes(t *testing.T, what string, got []time.Time, want ...time.Time) {
	t.Helper()
	fmtAll := func(ts []time.Time) string {
		s := make([]string, len(ts))
		for i, at := range ts {
			s[i] = fmtTime(at)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = valueDiff(got[i], want[i]) == ""
	}
	if !ok {
		t.Errorf("%s: got %s, want %s (in UTC)", what, fmtAll(got), fmtAll(want))
	}
}

// countKey is a (kind, state) pair TaskCountByState counts.
type countKey struct {
	Kind  domain.TaskKind
	State domain.TaskState
}

// countByState returns TaskCountByState as a map, failing on a pair counted
// twice or counted at zero (pairs without a task are left out).
func countByState(t *testing.T, q store.Querier) map[countKey]int {
	t.Helper()
	got, err := q.TaskCountByState(t.Context())
	if err != nil {
		t.Fatalf("TaskCountByState: %v", err)
	}
	out := map[countKey]int{}
	for _, c := range got {
		k := countKey{c.Kind, c.State}
		if _, dup := out[k]; dup {
			t.Errorf("TaskCountByState counts %s/%s twice: %+v", c.Kind, c.State, got)
		}
		if c.N <= 0 {
			t.Errorf("TaskCountByState returned %s/%s with N %d; pairs without a task are left out", c.Kind, c.State, c.N)
		}
		out[k] = c.N
	}
	return out
}

func checkCounts(t *testing.T, what string, got, want map[countKey]int) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: TaskCountByState = %v, want %v", what, got, want)
	}
}

func listRoots(t *testing.T, q store.Querier, limit int) []*domain.Task {
	t.Helper()
	got, err := q.TaskListRoots(t.Context(), "", limit)
	if err != nil {
		t.Fatalf("TaskListRoots(%d): %v", limit, err)
	}
	return got
}

func workerSeen(t *testing.T, q store.Querier, id string, now time.Time, heartbeat bool) {
	t.Helper()
	if err := q.WorkerUpsert(t.Context(), &store.WorkerUpsertParams{ID: id, Now: now, Heartbeat: heartbeat}); err != nil {
		t.Fatalf("WorkerUpsert(%s, %s, heartbeat %t): %v", id, fmtTime(now), heartbeat, err)
	}
}

func listWorkers(t *testing.T, q store.Querier, since time.Time, limit int) []*store.Worker {
	t.Helper()
	got, err := q.WorkerList(t.Context(), &store.WorkerListParams{Since: since, Limit: limit})
	if err != nil {
		t.Fatalf("WorkerList(%s, %d): %v", fmtTime(since), limit, err)
	}
	return got
}

func checkWorkers(t *testing.T, what string, got []*store.Worker, want ...*store.Worker) {
	t.Helper()
	ids := func(ws []*store.Worker) []string {
		out := make([]string, len(ws))
		for i, w := range ws {
			out[i] = w.ID
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Errorf("%s: got workers %q, want %q", what, ids(got), ids(want))
		return
	}
	for i := range want {
		if d := structDiff(got[i], want[i]); d != "" {
			t.Errorf("%s: worker %s differs: %s", what, want[i].ID, d)
		}
	}
}

func exerciseInspect(t *testing.T, newStore newFunc) {
	t.Run("TaskCountFinishedBuckets", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		j := NewJob("j1", at)
		insertJobs(t, s, j)
		tasks := NewTasks(j, 5)
		finish(tasks[1], domain.TaskCompleted, at.Add(-time.Hour))            // before Start: the first bucket
		finish(tasks[2], domain.TaskCompleted, at.Add(1500*time.Millisecond)) // bucket 3 (the fourth 500 ms)
		finish(tasks[3], domain.TaskCompleted, at.Add(time.Hour))             // after the last: the last bucket
		finish(tasks[4], domain.TaskCompleted, at.Add(499999*time.Microsecond))
		insertTasks(t, s, tasks...)
		got, err := s.TaskCountFinished(ctx, &store.TaskCountFinishedParams{JobID: "j1", Start: at, Width: 500 * time.Millisecond, Buckets: 4})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{2, 0, 0, 2}; !reflect.DeepEqual(got, want) {
			t.Fatalf("TaskCountFinished in 4 buckets of 500ms = %v, want %v", got, want)
		}
		got, err = s.TaskCountFinished(ctx, &store.TaskCountFinishedParams{JobID: "j1", Start: at, Width: 500 * time.Millisecond, Buckets: 8})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{2, 0, 0, 1, 0, 0, 0, 1}; !reflect.DeepEqual(got, want) {
			t.Fatalf("TaskCountFinished in 8 buckets of 500ms = %v, want %v", got, want)
		}
		for _, p := range []store.TaskCountFinishedParams{{JobID: "j1", Start: at, Width: time.Second}, {JobID: "j1", Start: at, Buckets: 3}} {
			if _, err := s.TaskCountFinished(ctx, &p); err == nil {
				t.Errorf("TaskCountFinished(%+v) succeeded; want an error for no bucket or no width", p)
			}
		}
	})

	t.Run("TaskFinishTimes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		zone := time.FixedZone("UTC+9", 9*3600)
		checkTimes(t, "finish times of a job of no tasks", finishTimes(t, s, "j1"))

		j1, j2, j3 := NewJob("j1", at), NewJob("j2", at), NewJob("j3", at)
		insertJobs(t, s, j1, j2, j3)
		t1 := NewTasks(j1, 6)
		// Completed chunks finish out of ChunkIndex order, in another zone
		// and with nanoseconds, which are truncated.
		finish(t1[1], domain.TaskCompleted, at.Add(30*time.Second+123).In(zone))
		finish(t1[2], domain.TaskFailed, at.Add(time.Second))
		finish(t1[3], domain.TaskCompleted, at.Add(10*time.Second+999).In(zone))
		finish(t1[4], domain.TaskCompleted, at.Add(20*time.Second))
		t1[5].State, t1[5].LeaseOwner, t1[5].LeaseExpiresAt, t1[5].Attempt = domain.TaskLeased, "w", at.Add(time.Minute), 1
		finish(t1[6], domain.TaskCancelled, at.Add(2*time.Second))
		finish(t1[0], domain.TaskCompleted, at.Add(3*time.Second)) // the stitch task
		tree := treeTask("0:j1.tree", "j1", domain.TaskPending, at)
		finish(tree, domain.TaskCompleted, at.Add(4*time.Second)) // a tree task of the job
		t2 := NewTasks(j2, 1)
		finish(t2[1], domain.TaskCompleted, at.Add(5*time.Second)) // another job's chunk
		insertTasks(t, s, append(append(append(t1, tree), t2...), NewTasks(j3, 2)...)...)

		want := []time.Time{at.Add(10 * time.Second), at.Add(20 * time.Second), at.Add(30 * time.Second)}
		checkTimes(t, "finish times of j1", finishTimes(t, s, "j1"), want...)
		checkTimes(t, "finish times of j2", finishTimes(t, s, "j2"), at.Add(5*time.Second))
		checkTimes(t, "finish times of a job with no completed chunk", finishTimes(t, s, "j3"))
		checkTimes(t, "finish times of a missing job", finishTimes(t, s, "nope"))

		// A chunk completed by TaskUpdate counts, inside the transaction too.
		leased := cloneTask(t1[5])
		finish(leased, domain.TaskCompleted, at.Add(15*time.Second))
		withIt := []time.Time{want[0], at.Add(15 * time.Second), want[1], want[2]}
		err := s.InTx(ctx, func(q store.Querier) error {
			if err := q.TaskUpdate(ctx, leased); err != nil {
				return err
			}
			checkTimes(t, "finish times of j1 inside the transaction", finishTimes(t, q, "j1"), withIt...)
			return nil
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		checkTimes(t, "finish times of j1 after a chunk completed", finishTimes(t, s, "j1"), withIt...)
		// A chunk that leaves the completed state stops counting.
		done := cloneTask(t1[4])
		done.State, done.FinishedAt = domain.TaskPending, time.Time{}
		if err := s.TaskUpdate(ctx, done); err != nil {
			t.Fatalf("TaskUpdate: %v", err)
		}
		checkTimes(t, "finish times of j1 after a chunk was reset", finishTimes(t, s, "j1"), want[0], at.Add(15*time.Second), want[2])
	})

	t.Run("TaskCountByState", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		checkCounts(t, "empty store", countByState(t, s), map[countKey]int{})

		// The suite pins no order: TaskCountByState's doc comment names none.
		j1, j2 := NewJob("j1", at), NewJob("j2", at.Add(time.Second))
		insertJobs(t, s, j1, j2)
		t1 := NewTasks(j1, 3)
		finish(t1[1], domain.TaskCompleted, at)
		t2 := NewTasks(j2, 2)
		t2[1].State, t2[1].LeaseOwner, t2[1].LeaseExpiresAt, t2[1].Attempt = domain.TaskLeased, "w", at.Add(time.Minute), 1
		finish(t2[2], domain.TaskFailed, at)
		root := treeTask("0:t1", "0:t1", domain.TaskPending, at)
		child := treeTask("0:t1.a", "0:t1", domain.TaskWaiting, at)
		done := treeTask("0:t1.b", "0:t1", domain.TaskPending, at)
		finish(done, domain.TaskCompleted, at)
		orphan := treeTask("0:x", "", domain.TaskPending, at) // of no tree
		finish(orphan, domain.TaskCancelled, at)
		insertTasks(t, s, append(append(t1, t2...), root, child, done, orphan)...)

		chunk, stitch, tree := domain.KindChunk, domain.KindStitch, domain.KindTree
		want := map[countKey]int{
			{chunk, domain.TaskPending}:   2,
			{chunk, domain.TaskCompleted}: 1,
			{chunk, domain.TaskLeased}:    1,
			{chunk, domain.TaskFailed}:    1,
			{stitch, domain.TaskWaiting}:  2,
			{tree, domain.TaskPending}:    1,
			{tree, domain.TaskWaiting}:    1,
			{tree, domain.TaskCompleted}:  1,
			{tree, domain.TaskCancelled}:  1,
		}
		checkCounts(t, "two jobs and a tree", countByState(t, s), want)

		// Moves inside a transaction show there and vanish with its rollback.
		err := s.InTx(ctx, func(q store.Querier) error {
			c := cloneTask(t2[2])
			c.State, c.FinishedAt = domain.TaskPending, time.Time{}
			if err := q.TaskUpdate(ctx, c); err != nil {
				return err
			}
			moved := maps.Clone(want)
			moved[countKey{chunk, domain.TaskPending}]++
			delete(moved, countKey{chunk, domain.TaskFailed})
			checkCounts(t, "inside the transaction", countByState(t, q), moved)
			return errBoom
		})
		checkErr(t, "InTx returning an error", err, errBoom)
		checkCounts(t, "after the rollback", countByState(t, s), want)

		// Counts follow TaskUpdate: a pair left without a task disappears.
		t1[2].State, t1[2].LeaseOwner, t1[2].LeaseExpiresAt, t1[2].Attempt = domain.TaskLeased, "w", at.Add(time.Minute), 1
		t1[0].State, t1[0].PendingUpstreams = domain.TaskPending, 0
		finish(root, domain.TaskCompleted, at.Add(time.Second))
		for _, tk := range []*domain.Task{t1[2], t1[0], root} {
			if err := s.TaskUpdate(ctx, tk); err != nil {
				t.Fatalf("TaskUpdate(%s): %v", tk.ID, err)
			}
		}
		want[countKey{chunk, domain.TaskPending}]--
		want[countKey{chunk, domain.TaskLeased}]++
		want[countKey{stitch, domain.TaskWaiting}]--
		want[countKey{stitch, domain.TaskPending}]++
		delete(want, countKey{tree, domain.TaskPending})
		want[countKey{tree, domain.TaskCompleted}]++
		checkCounts(t, "after three updates", countByState(t, s), want)
	})

	t.Run("TaskListRoots", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		zone := time.FixedZone("UTC-7", -7*3600)
		if got := listRoots(t, s, 0); len(got) != 0 {
			t.Fatalf("TaskListRoots of an empty store = %q", taskIDs(got))
		}

		oldest := treeTask("0:r-oldest", "0:r-oldest", domain.TaskPending, at.Add(-3*time.Hour))
		newest := treeTask("0:r-newest", "0:r-newest", domain.TaskWaiting, at.Add(-time.Hour).In(zone))
		// Two roots created at the same instant: the greater ID first.
		tieA := treeTask("0:r-tie-a", "0:r-tie-a", domain.TaskLeased, at.Add(-2*time.Hour))
		tieB := treeTask("0:r-tie-b", "0:r-tie-b", domain.TaskPending, at.Add(-2*time.Hour).In(zone))
		tieB.Owner = "ada"
		finish(tieA, domain.TaskCompleted, at) // a finished root is still a root
		tieA.Result = []byte(`{"answer":42}`)
		// Never roots: tree tasks that are not their tree's ID, and chunk and
		// stitch tasks whose ID is their job's, all created later.
		child := treeTask("0:r-oldest.a", "0:r-oldest", domain.TaskWaiting, at)
		orphan := treeTask("0:loose", "", domain.TaskPending, at)
		chunk := claimable("0:c", "0:c", 0, at, 0)
		chunk.CreatedAt = at
		j := NewJob("0:s", at)
		stitch := NewTasks(j, 0)[0]
		stitch.ID = j.ID
		stitch.CreatedAt = at.Add(time.Hour)
		insertTasks(t, s, tieA, child, oldest, orphan, newest, chunk, stitch, tieB)
		all := []*domain.Task{newest, tieB, tieA, oldest}
		check := func(what string, got []*domain.Task, want []*domain.Task) {
			t.Helper()
			checkIDs(t, what, taskIDs(got), taskIDs(want))
			if len(got) == len(want) {
				for i := range want {
					checkTask(t, what, got[i], want[i])
				}
			}
		}
		check("TaskListRoots(0)", listRoots(t, s, 0), all)
		adas, aerr := s.TaskListRoots(ctx, "ada", 10)
		if aerr != nil {
			t.Fatalf("TaskListRoots(ada, 10): %v", aerr)
		}
		check("TaskListRoots(ada, 10)", adas, []*domain.Task{tieB})
		check("TaskListRoots(-1)", listRoots(t, s, -1), all)
		check("TaskListRoots(4)", listRoots(t, s, 4), all)
		check("TaskListRoots(100)", listRoots(t, s, 100), all)
		check("TaskListRoots(1)", listRoots(t, s, 1), all[:1])
		check("TaskListRoots(3)", listRoots(t, s, 3), all[:3])

		// A root inserted and updated inside a transaction is listed there.
		latest := treeTask("0:r-latest", "0:r-latest", domain.TaskPending, at)
		err := s.InTx(ctx, func(q store.Querier) error {
			if err := q.TaskInsert(ctx, []*domain.Task{latest}); err != nil {
				return err
			}
			latest.State = domain.TaskLeased
			latest.LeaseOwner, latest.LeaseExpiresAt, latest.Attempt = "w", at.Add(time.Minute), 1
			if err := q.TaskUpdate(ctx, latest); err != nil {
				return err
			}
			check("TaskListRoots(2) inside a transaction", listRoots(t, q, 2), []*domain.Task{latest, newest})
			return nil
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		check("TaskListRoots(0) after the transaction", listRoots(t, s, 0), append([]*domain.Task{latest}, all...))
	})

	t.Run("WorkerUpsert", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		ever := time.Time{}
		checkWorkers(t, "no worker", listWorkers(t, s, ever, 0))

		// A new worker: first and last seen now, no heartbeat. Now comes in
		// another zone with nanoseconds, which are truncated.
		workerSeen(t, s, "host-a/17", at.Add(789).In(zone), false)
		w := &store.Worker{ID: "host-a/17", FirstSeen: at, LastSeen: at}
		checkWorkers(t, "a new worker", listWorkers(t, s, ever, 0), w)

		// A heartbeat moves LastSeen and sets LastHeartbeat.
		workerSeen(t, s, "host-a/17", at.Add(10*time.Second), true)
		w.LastSeen, w.LastHeartbeat = at.Add(10*time.Second), at.Add(10*time.Second)
		checkWorkers(t, "after a heartbeat", listWorkers(t, s, ever, 0), w)

		// A call without a heartbeat moves LastSeen and keeps LastHeartbeat.
		workerSeen(t, s, "host-a/17", at.Add(20*time.Second), false)
		w.LastSeen = at.Add(20 * time.Second)
		checkWorkers(t, "after a call", listWorkers(t, s, ever, 0), w)

		// A call recorded late, older than LastSeen, does not move it back.
		workerSeen(t, s, "host-a/17", at.Add(5*time.Second), false)
		checkWorkers(t, "after an older call", listWorkers(t, s, ever, 0), w)
		// Nor does an older heartbeat move LastHeartbeat back.
		workerSeen(t, s, "host-a/17", at.Add(5*time.Second), true)
		checkWorkers(t, "after an older heartbeat", listWorkers(t, s, ever, 0), w)
		// Pinned: a heartbeat older than LastSeen but newer than
		// LastHeartbeat moves LastHeartbeat forward, and only it.
		workerSeen(t, s, "host-a/17", at.Add(15*time.Second), true)
		w.LastHeartbeat = at.Add(15 * time.Second)
		checkWorkers(t, "after a late heartbeat", listWorkers(t, s, ever, 0), w)
		// The same call twice changes nothing.
		for range 2 {
			workerSeen(t, s, "host-a/17", at.Add(20*time.Second), false)
		}
		checkWorkers(t, "after repeated calls", listWorkers(t, s, ever, 0), w)

		// A worker first seen on a heartbeat has it set at once.
		workerSeen(t, s, "host-b/3", at.Add(time.Second), true)
		b := &store.Worker{ID: "host-b/3", FirstSeen: at.Add(time.Second), LastSeen: at.Add(time.Second), LastHeartbeat: at.Add(time.Second)}
		checkWorkers(t, "two workers", listWorkers(t, s, ever, 0), w, b)
		workerSeen(t, s, "host-b/3", at.Add(time.Minute), false)
		b.LastSeen = at.Add(time.Minute)
		checkWorkers(t, "after the second worker called", listWorkers(t, s, ever, 0), b, w)
	})

	t.Run("WorkerPage", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		// Key workers of three accounts (a '_' in a prefix is no wildcard)
		// and a pool worker; two pairs seen at the same time, told apart
		// by ID.
		seen := map[string]time.Time{
			"pool-1": at.Add(3 * time.Second), "ada/k@b2": at.Add(2 * time.Second), "ada/k@b1": at.Add(2 * time.Second),
			"a_b/k@x": at.Add(time.Second), "axb/k@y": at.Add(time.Second), "ada/old@z": at,
		}
		for id, when := range seen {
			workerSeen(t, s, id, when, false)
		}
		page := func(since time.Time, prefix string, after *store.WorkerCursor, limit int) []string {
			t.Helper()
			ws, err := s.WorkerPage(t.Context(), &store.WorkerPageParams{Since: since, Prefix: prefix, After: after, Limit: limit})
			if err != nil {
				t.Fatalf("WorkerPage(%s, %q, %v, %d): %v", fmtTime(since), prefix, after, limit, err)
			}
			ids := make([]string, len(ws))
			for i, w := range ws {
				ids[i] = w.ID
				if !w.LastSeen.Equal(seen[w.ID]) {
					t.Errorf("worker %s: last seen %s, want %s", w.ID, fmtTime(w.LastSeen), fmtTime(seen[w.ID]))
				}
			}
			return ids
		}
		for _, tc := range []struct {
			what   string
			since  time.Time
			prefix string
			after  *store.WorkerCursor
			limit  int
			want   []string
		}{
			{"every worker", time.Time{}, "", nil, 0, []string{"pool-1", "ada/k@b1", "ada/k@b2", "a_b/k@x", "axb/k@y", "ada/old@z"}},
			{"ada's", time.Time{}, "ada/", nil, 0, []string{"ada/k@b1", "ada/k@b2", "ada/old@z"}},
			{"a_b's", time.Time{}, "a_b/", nil, 0, []string{"a_b/k@x"}},
			{"nobody's", time.Time{}, "bob/", nil, 0, []string{}},
			{"ada's seen lately", at.Add(time.Second), "ada/", nil, 0, []string{"ada/k@b1", "ada/k@b2"}},
			{"the first two", time.Time{}, "", nil, 2, []string{"pool-1", "ada/k@b1"}},
			{"after a tie's first", time.Time{}, "", &store.WorkerCursor{LastSeen: at.Add(2 * time.Second), ID: "ada/k@b1"}, 2, []string{"ada/k@b2", "a_b/k@x"}},
			{"ada's after b2", time.Time{}, "ada/", &store.WorkerCursor{LastSeen: at.Add(2 * time.Second), ID: "ada/k@b2"}, 0, []string{"ada/old@z"}},
			{"after the last", time.Time{}, "", &store.WorkerCursor{LastSeen: at, ID: "ada/old@z"}, 0, []string{}},
		} {
			if got := page(tc.since, tc.prefix, tc.after, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %q, want %q", tc.what, got, tc.want)
			}
		}
	})

	t.Run("WorkerWorkloads", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		ever := time.Time{}
		announce := func(now time.Time, workloads ...string) {
			t.Helper()
			if err := s.WorkerUpsert(t.Context(), &store.WorkerUpsertParams{ID: "w", Now: now, Announced: true, Workloads: workloads}); err != nil {
				t.Fatalf("WorkerUpsert(w, %s, announcing %q): %v", fmtTime(now), workloads, err)
			}
		}
		// A worker first seen announcing: its workloads at once.
		announce(at, "dock", "score")
		w := &store.Worker{ID: "w", FirstSeen: at, LastSeen: at, Workloads: []string{"dock", "score"}}
		checkWorkers(t, "a worker that announced", listWorkers(t, s, ever, 0), w)
		// A call that announces nothing (a heartbeat, a tree poll) keeps them.
		workerSeen(t, s, "w", at.Add(time.Second), true)
		w.LastSeen, w.LastHeartbeat = at.Add(time.Second), at.Add(time.Second)
		checkWorkers(t, "after a call that announced nothing", listWorkers(t, s, ever, 0), w)
		// A later announcement replaces them.
		announce(at.Add(2*time.Second), "fold")
		w.LastSeen, w.Workloads = at.Add(2*time.Second), []string{"fold"}
		checkWorkers(t, "after a new announcement", listWorkers(t, s, ever, 0), w)
		// One recorded late does not.
		announce(at.Add(time.Second), "stale")
		checkWorkers(t, "after an older announcement", listWorkers(t, s, ever, 0), w)
		// Announcing none (a worker that takes any) clears them.
		announce(at.Add(3 * time.Second))
		w.LastSeen, w.Workloads = at.Add(3*time.Second), nil
		checkWorkers(t, "after announcing none", listWorkers(t, s, ever, 0), w)
		// Versions come with the workloads they are of, and go with them.
		versions := map[string]string{"dock": "2.1+cuda", "tanimoto": "builtin:tanimoto:1"}
		if err := s.WorkerUpsert(t.Context(), &store.WorkerUpsertParams{ID: "w", Now: at.Add(4 * time.Second), Announced: true,
			Workloads: []string{"dock", "score", "tanimoto"}, Versions: versions}); err != nil {
			t.Fatal(err)
		}
		w.LastSeen, w.Workloads, w.Versions = at.Add(4*time.Second), []string{"dock", "score", "tanimoto"}, versions
		checkWorkers(t, "after announcing versions", listWorkers(t, s, ever, 0), w)
		announce(at.Add(5*time.Second), "dock")
		w.LastSeen, w.Workloads, w.Versions = at.Add(5*time.Second), []string{"dock"}, nil
		checkWorkers(t, "after announcing no versions", listWorkers(t, s, ever, 0), w)
		// A worker first seen without announcing has none.
		workerSeen(t, s, "v", at, false)
		checkWorkers(t, "a worker that never announced", listWorkers(t, s, ever, 0), w, &store.Worker{ID: "v", FirstSeen: at, LastSeen: at})
	})

	t.Run("WorkerAddDone", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		ever := time.Time{}
		workerSeen(t, s, "a", at, false)
		workerSeen(t, s, "b", at.Add(time.Second), false)
		if err := s.WorkerAddDone(ctx, nil, at); err != nil {
			t.Fatalf("WorkerAddDone(none): %v", err)
		}
		if err := s.WorkerAddDone(ctx, map[string]int64{"a": 3}, at.Add(time.Hour)); err != nil {
			t.Fatalf("WorkerAddDone(a: 3): %v", err)
		}
		a := &store.Worker{ID: "a", FirstSeen: at, LastSeen: at, TasksDone: 3}
		b := &store.Worker{ID: "b", FirstSeen: at.Add(time.Second), LastSeen: at.Add(time.Second)}
		checkWorkers(t, "after one worker's tasks", listWorkers(t, s, ever, 0), b, a)
		// Several at once, one of them unknown so far: it is made, seen now.
		// Inside a transaction that is rolled back, nothing is added.
		err := s.InTx(ctx, func(q store.Querier) error {
			if err := q.WorkerAddDone(ctx, map[string]int64{"a": 100, "b": 100}, at); err != nil {
				t.Fatalf("WorkerAddDone in a transaction: %v", err)
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InTx = %v, want errBoom", err)
		}
		err = s.InTx(ctx, func(q store.Querier) error {
			return q.WorkerAddDone(ctx, map[string]int64{"b": 2, "a": 4, "c": 1}, at.Add(2*time.Second))
		})
		if err != nil {
			t.Fatalf("WorkerAddDone(a: 4, b: 2, c: 1): %v", err)
		}
		a.TasksDone, b.TasksDone = 7, 2
		c := &store.Worker{ID: "c", FirstSeen: at.Add(2 * time.Second), LastSeen: at.Add(2 * time.Second), TasksDone: 1}
		checkWorkers(t, "after three workers' tasks", listWorkers(t, s, ever, 0), c, b, a)
	})

	t.Run("WorkerList", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := Epoch()
		ever := time.Time{}
		// Most recently seen first, then by ID: w1, w2 and w3 share a LastSeen.
		var all []*store.Worker
		for i, off := range []time.Duration{50, 40, 40, 40, 30, 20, 10} {
			all = append(all, &store.Worker{ID: fmt.Sprintf("w%d", i), FirstSeen: at, LastSeen: at.Add(off * time.Second)})
		}
		for _, i := range []int{5, 3, 0, 6, 2, 1, 4} { // out of order
			workerSeen(t, s, all[i].ID, at, false)
			workerSeen(t, s, all[i].ID, all[i].LastSeen, false)
		}
		checkWorkers(t, "WorkerList(ever, 0)", listWorkers(t, s, ever, 0), all...)
		checkWorkers(t, "WorkerList(ever, -1)", listWorkers(t, s, ever, -1), all...)
		checkWorkers(t, "WorkerList(ever, 7)", listWorkers(t, s, ever, 7), all...)
		checkWorkers(t, "WorkerList(ever, 3)", listWorkers(t, s, ever, 3), all[:3]...)
		checkWorkers(t, "WorkerList(ever, 2)", listWorkers(t, s, ever, 2), all[:2]...)
		// since is inclusive, to the microsecond, whatever its zone.
		zone := time.FixedZone("UTC-2", -2*3600)
		since := at.Add(30 * time.Second).In(zone)
		checkWorkers(t, "WorkerList(at LastSeen of w4, 0)", listWorkers(t, s, since, 0), all[:5]...)
		checkWorkers(t, "WorkerList(just after LastSeen of w4, 0)", listWorkers(t, s, since.Add(time.Microsecond), 0), all[:4]...)
		checkWorkers(t, "WorkerList(at LastSeen of w4, 2)", listWorkers(t, s, since, 2), all[:2]...)
		checkWorkers(t, "WorkerList(after every LastSeen, 0)", listWorkers(t, s, at.Add(time.Minute), 0))
		// A late call moves neither LastSeen nor the order.
		workerSeen(t, s, "w6", at.Add(5*time.Second), true)
		all[6].LastHeartbeat = at.Add(5 * time.Second)
		checkWorkers(t, "WorkerList(ever, 0) after a late heartbeat", listWorkers(t, s, ever, 0), all...)
		checkWorkers(t, "WorkerList(since w6's LastSeen, 0)", listWorkers(t, s, at.Add(10*time.Second), 0), all...)
		checkWorkers(t, "WorkerList(after w6's LastSeen, 0)", listWorkers(t, s, at.Add(10*time.Second+time.Microsecond), 0), all[:6]...)

		// WorkerDelete removes those last seen strictly before its time.
		n, err := s.WorkerDelete(t.Context(), at.Add(30*time.Second))
		if err != nil || n != 2 {
			t.Fatalf("WorkerDelete(before w4's LastSeen) = %d, %v; want 2 (w5, w6)", n, err)
		}
		checkWorkers(t, "WorkerList(ever, 0) after WorkerDelete", listWorkers(t, s, ever, 0), all[:5]...)
		if n, err := s.WorkerDelete(t.Context(), at.Add(30*time.Second)); err != nil || n != 0 {
			t.Fatalf("WorkerDelete again = %d, %v; want 0", n, err)
		}
	})

	t.Run("WorkersInTx", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		at := Epoch()
		workerSeen(t, s, "w1", at, false)
		w1 := &store.Worker{ID: "w1", FirstSeen: at, LastSeen: at}
		err := s.InTx(ctx, func(q store.Querier) error {
			workerSeen(t, q, "w2", at.Add(time.Second), true)
			workerSeen(t, q, "w1", at.Add(2*time.Second), true)
			checkWorkers(t, "inside a transaction", listWorkers(t, q, at, 0),
				&store.Worker{ID: "w1", FirstSeen: at, LastSeen: at.Add(2 * time.Second), LastHeartbeat: at.Add(2 * time.Second)},
				&store.Worker{ID: "w2", FirstSeen: at.Add(time.Second), LastSeen: at.Add(time.Second), LastHeartbeat: at.Add(time.Second)})
			return errBoom
		})
		checkErr(t, "InTx returning an error", err, errBoom)
		checkWorkers(t, "after the rollback", listWorkers(t, s, time.Time{}, 0), w1)
		err = s.InTx(ctx, func(q store.Querier) error {
			return q.WorkerUpsert(ctx, &store.WorkerUpsertParams{ID: "w2", Now: at.Add(time.Second)})
		})
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		checkWorkers(t, "after the commit", listWorkers(t, s, time.Time{}, 0),
			&store.Worker{ID: "w2", FirstSeen: at.Add(time.Second), LastSeen: at.Add(time.Second)}, w1)
	})
}
