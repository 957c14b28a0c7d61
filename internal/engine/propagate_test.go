package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
)

// router delivers messages between engines in this process, as the rpc
// package's Peers does between processes, and can take a shard down.
type router struct {
	mu      sync.Mutex
	shards  map[string]*engine.Engine
	down    map[string]bool
	refuse  bool
	hold    func(m *engine.Message) error // fails chosen messages, when set
	applied map[engine.MessageKind]int
}

func (r *router) Deliver(ctx context.Context, shard string, m *engine.Message) error {
	r.mu.Lock()
	e, down, refuse, hold := r.shards[shard], r.down[shard], r.refuse, r.hold
	r.mu.Unlock()
	if down || e == nil {
		return fmt.Errorf("%w: shard %s is down", engine.ErrUnreachable, shard)
	}
	if refuse {
		return fmt.Errorf("%w: told to", engine.ErrRefused)
	}
	if hold != nil {
		if err := hold(m); err != nil {
			return err
		}
	}
	var err error
	switch m.Kind {
	case engine.MsgSubmitTask:
		err = e.AcceptTasks(ctx, m.Tasks)
	case engine.MsgReportSuccess:
		err = e.ReportSuccess(ctx, m.TaskID, m.UpstreamID, m.Result)
	case engine.MsgSetFailed:
		err = e.ReportFailure(ctx, m.TaskID, m.UpstreamID, m.Error)
	case engine.MsgSetCancel:
		err = e.CancelTask(ctx, m.TaskID, m.Error)
	}
	if errors.Is(err, domain.ErrInvalidArgument) || errors.Is(err, domain.ErrConflict) {
		return fmt.Errorf("%w: %w", engine.ErrRefused, err)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", engine.ErrNoTask, err)
	}
	if err == nil {
		r.mu.Lock()
		r.applied[m.Kind]++
		r.mu.Unlock()
	}
	return err
}

func (r *router) setDown(shard string, down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[shard] = down
}

// newMesh returns one engine per shard, each on its own SQLite file, wired
// by a router, on a shared clock.
func newMesh(t *testing.T, shards ...string) (map[string]*engine.Engine, *router, *enginetest.Clock) {
	return newMeshGivingUp(t, 0, shards...)
}

// newMeshGivingUp is newMesh with engines that give up on a shard that
// leaves a message unanswered for giveUp (Config.PeerGiveUp).
func newMeshGivingUp(t *testing.T, giveUp time.Duration, shards ...string) (map[string]*engine.Engine, *router, *enginetest.Clock) {
	r := &router{shards: map[string]*engine.Engine{}, down: map[string]bool{}, applied: map[engine.MessageKind]int{}}
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, s := range shards {
		r.shards[s] = newEngine(openStore(t), engine.Config{Shard: s, Peers: r, Now: c.Now, Jitter: func() float64 { return 0 },
			PeerGiveUp: giveUp})
	}
	return r.shards, r, c
}

func known(string) bool { return true }

func arg(v string) domain.TreeArg { return domain.TreeArg{Value: json.RawMessage(v)} }

func ref(id string) domain.TreeArg { return domain.TreeArg{Ref: id} }

// pollOne leases the one runnable tree task of e, failing without one.
func pollOne(t *testing.T, e *engine.Engine) *engine.TreeTask {
	t.Helper()
	task, err := e.PollTree(t.Context(), "w", nil, 0)
	if err != nil || task == nil {
		t.Fatalf("PollTree on %s: %v, %v; want a task", e.Shard(), task, err)
	}
	return task
}

func state(t *testing.T, e *engine.Engine, id string) domain.TaskState {
	t.Helper()
	v, err := e.GetTask(t.Context(), id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return v.Task.State
}

// TestOutboxDeliversOnceShardIsBack: a result for a downstream on a shard
// that is down waits in the outbox, is retried with a backoff, and is
// applied once when the shard answers; replays change nothing.
func TestOutboxDeliversOnceShardIsBack(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMesh(t, "s0", "s1")
	s0, s1 := mesh["s0"], mesh["s1"]
	ctx := t.Context()

	r.setDown("s1", true) // the root's shard is down at submission
	ids, root, err := s0.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s1:root", Workload: "sum", Args: []domain.TreeArg{ref("s0:a"), ref("s1:b"), arg("100")}},
		{ID: "s0:a", Workload: "num", Args: []domain.TreeArg{arg("1")}},
		{ID: "s1:b", Workload: "num", Args: []domain.TreeArg{arg("2")}},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	if root != ids["s1:root"] || root[:3] != "s1:" || ids["s0:a"][:3] != "s0:" {
		t.Fatalf("IDs %v root %s: each task must be on its shard, the root's ID the tree's", ids, root)
	}
	if st, _ := s0.GetOutboxStats(ctx); st.Pending != 1 {
		t.Fatalf("outbox after a submission to a shard that is down: %+v, want the one creation pending", st)
	}
	a := pollOne(t, s0)
	if err := s0.CompleteTree(ctx, a.ID, "w", a.Attempt, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if n, err := s0.DeliverOutbox(ctx); n != 0 || err != nil {
		t.Fatalf("DeliverOutbox with s1 down: %d, %v; want 0 delivered", n, err)
	}
	c.Advance(time.Minute)
	if n, _ := s0.DeliverOutbox(ctx); n != 0 {
		t.Fatalf("delivered %d messages to a shard that is down", n)
	}
	if st, _ := s0.GetOutboxStats(ctx); st.Pending != 2 || st.Dead != 0 {
		t.Fatalf("outbox while s1 is down: %+v, want 2 pending", st)
	}

	r.setDown("s1", false)
	if n, _ := s0.DeliverOutbox(ctx); n != 0 {
		t.Fatalf("delivered %d messages before their backoff passed", n)
	}
	c.Advance(time.Minute)
	if n, err := s0.DeliverOutbox(ctx); n != 2 || err != nil {
		t.Fatalf("DeliverOutbox once s1 is back: %d, %v; want the creation then the result", n, err)
	}
	if st, _ := s0.GetOutboxStats(ctx); st.Pending != 0 {
		t.Fatalf("outbox after delivery: %+v, want empty", st)
	}
	b := pollOne(t, s1)
	if b.ID != ids["s1:b"] {
		t.Fatalf("polled %s on s1, want b: the root must wait for b", b.ID)
	}
	if err := s1.CompleteTree(ctx, b.ID, "w", b.Attempt, json.RawMessage(`2`)); err != nil {
		t.Fatal(err)
	}
	rt := pollOne(t, s1)
	if rt.ID != root || len(rt.Args) != 3 || string(rt.Args[0]) != "1" || string(rt.Args[1]) != "2" || string(rt.Args[2]) != "100" {
		t.Fatalf("root %s with args %s, want %s with [1 2 100]", rt.ID, rt.Args, root)
	}

	// Replays: the same result again changes nothing; another is refused.
	if err := s1.ReportSuccess(ctx, root, a.ID, json.RawMessage(` 1 `)); err != nil {
		t.Fatalf("replayed result: %v", err)
	}
	if err := s1.ReportSuccess(ctx, root, a.ID, json.RawMessage(`5`)); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("another result from the same upstream: %v, want ErrConflict", err)
	}
	if err := s1.ReportSuccess(ctx, root, "s0:nobody", json.RawMessage(`5`)); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("a result from no upstream of the task: %v, want ErrInvalidArgument", err)
	}
	if err := s1.ReportSuccess(ctx, "s1:nothing", a.ID, json.RawMessage(`5`)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a result for a task not created yet: %v, want ErrNotFound (the sender retries)", err)
	}
	v, _ := s1.GetTask(ctx, root)
	if v.Task.PendingUpstreams != 0 || v.Task.State != domain.TaskLeased {
		t.Fatalf("root after replays: %d pending upstreams, %s; want 0, leased", v.Task.PendingUpstreams, v.Task.State)
	}
	if r.applied[engine.MsgSubmitTask] != 1 || r.applied[engine.MsgReportSuccess] != 1 {
		t.Fatalf("messages applied: %v, want one creation and one result", r.applied)
	}
}

// TestAcceptTasksIdempotent: a tree's tasks sent twice are created once;
// other tasks under the same IDs, or tasks of another shard, are refused.
func TestAcceptTasksIdempotent(t *testing.T) {
	t.Parallel()
	mesh, _, c := newMesh(t, "s1")
	s1 := mesh["s1"]
	ctx := t.Context()
	placed := []engine.PlacedTask{
		{ID: "s1:r", TreeID: "s1:r", Workload: "sum", MaxAttempts: 3, LeaseSeconds: 60, TreeCreatedAt: c.Now(),
			Args: []domain.TreeArg{{Ref: "s1:r-t1"}, {Value: json.RawMessage(`{"k": [1, 2]}`)}}},
		{ID: "s1:r-t1", TreeID: "s1:r", DownstreamID: "s1:r", Workload: "num", MaxAttempts: 3, LeaseSeconds: 60,
			Position: 1, TreeCreatedAt: c.Now(), Args: []domain.TreeArg{{Value: json.RawMessage(`1`)}}},
	}
	for range 2 {
		if err := s1.AcceptTasks(ctx, placed); err != nil {
			t.Fatal(err)
		}
	}
	if got := state(t, s1, "s1:r"); got != domain.TaskWaiting {
		t.Fatalf("root %s, want waiting", got)
	}
	leaf := pollOne(t, s1)
	if task, _ := s1.PollTree(ctx, "w", nil, 0); task != nil {
		t.Fatalf("a second runnable task %s after a replayed creation", task.ID)
	}
	if err := s1.AcceptTasks(ctx, placed); err != nil {
		t.Fatalf("replay after the leaf was leased: %v", err)
	}
	if got := state(t, s1, leaf.ID); got != domain.TaskLeased {
		t.Fatalf("a replayed creation reset the leased leaf to %s", got)
	}
	other := append([]engine.PlacedTask(nil), placed...)
	other[1].Workload = "other"
	if err := s1.AcceptTasks(ctx, other); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("other tasks under taken IDs: %v, want ErrConflict", err)
	}
	foreign := []engine.PlacedTask{{ID: "s2:x", TreeID: "s2:x", Workload: "w", MaxAttempts: 1, LeaseSeconds: 60}}
	// Not refused for good: the sender's topology may be set right later.
	if err := s1.AcceptTasks(ctx, foreign); !errors.Is(err, domain.ErrNotReady) {
		t.Fatalf("a task of another shard: %v, want ErrNotReady", err)
	}
	if _, err := s1.GetTask(ctx, "s2:x"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused task was created: %v", err)
	}
}

// TestFailureAcrossShards: a leaf that fails for good fails its path to the
// root and cancels every other task, whatever the order messages arrive in.
func TestFailureAcrossShards(t *testing.T) {
	t.Parallel()
	mesh, _, c := newMesh(t, "s0", "s1", "s2")
	ctx := t.Context()
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s1:a"), ref("s2:b"), ref("s0:c")}},
		{ID: "s1:a", Workload: "f", Args: []domain.TreeArg{ref("s2:bad"), ref("s0:l1")}},
		{ID: "s2:b", Workload: "f", Args: []domain.TreeArg{ref("s1:l2")}},
		{ID: "s0:c", Workload: "leaf", Args: []domain.TreeArg{arg("0")}},
		{ID: "s2:bad", Workload: "bad", MaxAttempts: 1},
		{ID: "s0:l1", Workload: "leaf"},
		{ID: "s1:l2", Workload: "leaf"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	// c (first in claim order) completes: its result is in r before
	// anything fails.
	c0 := pollOne(t, mesh["s0"])
	if c0.ID != ids["s0:c"] {
		t.Fatalf("polled %s on s0, want c", c0.ID)
	}
	if err := mesh["s0"].CompleteTree(ctx, c0.ID, "w", c0.Attempt, json.RawMessage(`0`)); err != nil {
		t.Fatal(err)
	}
	bad := pollOne(t, mesh["s2"])
	if _, err := mesh["s2"].FailTask(ctx, engine.FailTaskParams{TaskID: bad.ID, WorkerID: "w", Attempt: bad.Attempt, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	// Deliver shard by shard, in an order that lets cancellations race
	// ahead of failures, until nothing is left to deliver.
	for round := 0; ; round++ {
		n := 0
		for _, s := range []string{"s0", "s2", "s1"} {
			d, err := mesh[s].DeliverOutbox(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += d
		}
		if n == 0 {
			break
		}
		if round > 20 {
			t.Fatal("messages keep flowing after 20 rounds")
		}
		c.Advance(time.Minute)
	}
	want := map[string]domain.TaskState{
		"s2:bad": domain.TaskFailed, "s1:a": domain.TaskFailed, "s0:r": domain.TaskFailed, "s0:c": domain.TaskCompleted,
		"s2:b": domain.TaskCancelled, "s0:l1": domain.TaskCancelled, "s1:l2": domain.TaskCancelled,
	}
	for p, st := range want {
		if got := state(t, mesh[p[:2]], ids[p]); got != st {
			t.Errorf("%s: %s, want %s", p, got, st)
		}
	}
	v, _ := mesh["s0"].GetTask(ctx, ids["s0:r"])
	if want := "upstream task " + ids["s2:bad"] + " failed: "; len(v.Task.Error) < len(want) || v.Task.Error[:len(want)] != want {
		t.Errorf("root's error %q, want it to start %q", v.Task.Error, want)
	}
	for s, e := range mesh {
		if st, _ := e.GetOutboxStats(ctx); st.Pending != 0 || st.Dead != 0 {
			t.Errorf("outbox of %s: %+v, want empty", s, st)
		}
	}
}

// TestOutboxGivesUpOnRefusal: a message its receiver refuses for good is
// kept, given up on, and never sent again.
func TestOutboxGivesUpOnRefusal(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMesh(t, "s0", "s1")
	ctx := t.Context()
	r.refuse = true
	if _, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{{ID: "s1:x", Workload: "w"}}}, known); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	if n, _ := mesh["s0"].DeliverOutbox(ctx); n != 0 {
		t.Fatalf("delivered %d refused messages", n)
	}
	if st, _ := mesh["s0"].GetOutboxStats(ctx); st.Pending != 0 || st.Dead != 1 {
		t.Fatalf("outbox after a refusal: %+v, want one given up on", st)
	}
}

// TestOutboxMessageWaitingDoesNotHoldOthers: a message its receiver cannot
// apply yet (its task is not there) is retried without holding back the
// messages behind it to the same shard.
func TestOutboxMessageWaitingDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMesh(t, "s0", "s1")
	s0, s1 := mesh["s0"], mesh["s1"]
	ctx := t.Context()
	r.hold = func(m *engine.Message) error { // the creation of tree 1 is late
		if m.Kind == engine.MsgSubmitTask && m.Tasks[0].Workload == "late" {
			return errors.New("not now")
		}
		return nil
	}
	submit := func(workload string) map[string]string {
		ids, _, err := s0.SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
			{ID: "s1:r", Workload: workload, Args: []domain.TreeArg{ref("s0:l")}},
			{ID: "s0:l", Workload: "leaf"},
		}}, known)
		if err != nil {
			t.Fatal(err)
		}
		l := pollOne(t, s0)
		if err := s0.CompleteTree(ctx, l.ID, "w", l.Attempt, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	late := submit("late")
	ontime := submit("ontime")
	c.Advance(time.Minute)
	if _, err := s0.DeliverOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	if got := state(t, s1, ontime["s1:r"]); got != domain.TaskPending {
		t.Fatalf("tree 2's root is %s behind tree 1's undeliverable messages, want pending", got)
	}
	if _, err := s1.GetTask(ctx, late["s1:r"]); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("tree 1's root exists before its creation was delivered: %v", err)
	}
	r.mu.Lock()
	r.hold = nil
	r.mu.Unlock()
	c.Advance(time.Minute)
	if _, err := s0.DeliverOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute) // the result, refused while its task was missing
	if _, err := s0.DeliverOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	if got := state(t, s1, late["s1:r"]); got != domain.TaskPending {
		t.Fatalf("tree 1's root is %s once its creation and result arrived, want pending", got)
	}
}

// TestInternalCallsLeaveJobsAlone: another shard cannot fail, cancel or
// feed a job's tasks; only their own shard changes them.
func TestInternalCallsLeaveJobsAlone(t *testing.T) {
	t.Parallel()
	mesh, _, _ := newMesh(t, "s0")
	e := mesh["s0"]
	ctx := t.Context()
	j, _, err := e.CreateJob(ctx, spec(2), "")
	if err != nil {
		t.Fatal(err)
	}
	chunk := j.ID + "-0"
	if err := e.ReportFailure(ctx, j.RootTaskID, chunk, "boom"); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("SetFailed on a job's stitch task: %v, want ErrInvalidArgument", err)
	}
	if err := e.CancelTask(ctx, chunk, "because"); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("SetCancel on a job's chunk: %v, want ErrInvalidArgument", err)
	}
	if err := e.ReportSuccess(ctx, j.RootTaskID, chunk, json.RawMessage(`1`)); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("ReportSuccess to a job's stitch task: %v, want ErrInvalidArgument", err)
	}
	v, _ := e.GetJob(ctx, j.ID)
	if v.Status != domain.JobPending || v.Tasks.Pending != 2 {
		t.Fatalf("job after refused internal calls: %s with %+v", v.Status, v.Tasks)
	}
}

// TestRefusedCreationFailsTheTree: when a shard refuses for good to create
// its tasks of a tree, the tree fails as if those tasks had failed: the
// path to the root fails, naming them, and the rest is cancelled.
func TestRefusedCreationFailsTheTree(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMesh(t, "s0", "s1", "s2")
	ctx := t.Context()
	r.hold = func(m *engine.Message) error {
		if m.Kind == engine.MsgSubmitTask && strings.HasPrefix(m.Tasks[0].ID, "s2:") {
			return fmt.Errorf("%w: no room", engine.ErrRefused)
		}
		return nil
	}
	// r(s0) = f(mid(s2), other(s0), also(s2)); mid(s2) = f(leaf(s1)).
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s2:mid"), ref("s0:other"), ref("s2:also")}},
		{ID: "s2:mid", Workload: "f", Args: []domain.TreeArg{ref("s1:leaf")}},
		{ID: "s0:other", Workload: "leaf"},
		{ID: "s2:also", Workload: "leaf"},
		{ID: "s1:leaf", Workload: "leaf"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.Advance(time.Minute)
		for _, s := range []string{"s0", "s1", "s2"} {
			if _, err := mesh[s].DeliverOutbox(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, want := range map[string]domain.TaskState{"s0:r": domain.TaskFailed, "s0:other": domain.TaskCancelled, "s1:leaf": domain.TaskCancelled} {
		if got := state(t, mesh[p[:2]], ids[p]); got != want {
			t.Errorf("%s: %s, want %s", p, got, want)
		}
	}
	v, _ := mesh["s0"].GetTask(ctx, ids["s0:r"])
	if !strings.Contains(v.Task.Error, ids["s2:mid"]+" could not be created on shard s2") || !strings.Contains(v.Task.Error, "no room") {
		t.Errorf("root's error %q does not say which task could not be created, and why", v.Task.Error)
	}
	// Nothing is sent to the tasks that never were: no message waits.
	for _, s := range []string{"s0", "s1", "s2"} {
		st, _ := mesh[s].GetOutboxStats(ctx)
		if want := map[string]int{"s0": 1}[s]; st.Dead != want || st.Pending != 0 {
			t.Errorf("%s's outbox: %+v, want %d given up (the refused creation) and nothing pending", s, st, want)
		}
	}
}

// TestMessageForTaskThatNeverAppears: a message whose task its receiver
// does not have is retried, and given up after a day.
func TestMessageForTaskThatNeverAppears(t *testing.T) {
	t.Parallel()
	mesh, _, c := newMesh(t, "s0", "s1")
	ctx := t.Context()
	// A result for a task s1 never heard of: its creation was lost.
	if err := mesh["s0"].AcceptTasks(ctx, []engine.PlacedTask{{ID: "s0:l", TreeID: "s1:r", DownstreamID: "s1:r",
		Workload: "leaf", MaxAttempts: 1, LeaseSeconds: 60, TreeCreatedAt: c.Now()}}); err != nil {
		t.Fatal(err)
	}
	l := pollOne(t, mesh["s0"])
	if err := mesh["s0"].CompleteTree(ctx, l.ID, "w", l.Attempt, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	mesh["s0"].DeliverOutbox(ctx)
	if st, _ := mesh["s0"].GetOutboxStats(ctx); st.Pending != 1 || st.Dead != 0 {
		t.Fatalf("outbox an hour later: %+v, want the result still waiting", st)
	}
	c.Advance(24 * time.Hour)
	mesh["s0"].DeliverOutbox(ctx)
	if st, _ := mesh["s0"].GetOutboxStats(ctx); st.Pending != 0 || st.Dead != 1 {
		t.Fatalf("outbox a day later: %+v, want the result given up on", st)
	}
}
