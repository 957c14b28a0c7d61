package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
)

// deliverAll runs every engine's outbox once, in the order given.
func deliverAll(t *testing.T, mesh map[string]*engine.Engine, order ...string) {
	t.Helper()
	for _, s := range order {
		if _, err := mesh[s].DeliverOutbox(t.Context()); err != nil {
			t.Fatalf("DeliverOutbox on %s: %v", s, err)
		}
	}
}

func checkStates(t *testing.T, mesh map[string]*engine.Engine, ids map[string]string, want map[string]domain.TaskState) {
	t.Helper()
	for p, st := range want {
		if got := state(t, mesh[p[:2]], ids[p]); got != st {
			t.Errorf("%s: %s, want %s", p, got, st)
		}
	}
}

func checkOutbox(t *testing.T, e *engine.Engine, pending, dead int) {
	t.Helper()
	st, err := e.GetOutboxStats(t.Context())
	if err != nil || st.Pending != pending || st.Dead != dead {
		t.Fatalf("outbox of %s: %+v (%v), want %d pending and %d given up on", e.Shard(), st, err, pending, dead)
	}
}

// TestOutboxGivesUpOnSilentShard: the creation of a tree's tasks on a
// shard that never answers (a pattern topology lets a tree name any
// shard) is retried until Config.PeerGiveUp, then given up on: the tree
// fails, its root's error naming the shard, and the rest is cancelled on
// every shard.
func TestOutboxGivesUpOnSilentShard(t *testing.T) {
	t.Parallel()
	mesh, _, c := newMeshGivingUp(t, 10*time.Minute, "s0", "s1") // s7 is nowhere
	ctx := t.Context()
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s7:x"), ref("s0:l"), ref("s1:m")}},
		{ID: "s7:x", Workload: "f"},
		{ID: "s0:l", Workload: "leaf"},
		{ID: "s1:m", Workload: "leaf"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	checkOutbox(t, mesh["s0"], 1, 0)
	for range 9 { // nine minutes of retries: still waiting
		c.Advance(time.Minute)
		deliverAll(t, mesh, "s0", "s1")
	}
	checkOutbox(t, mesh["s0"], 1, 0)
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s0:r": domain.TaskWaiting, "s0:l": domain.TaskPending, "s1:m": domain.TaskPending})

	c.Advance(time.Minute + time.Second)
	deliverAll(t, mesh, "s0", "s1", "s0")
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s0:r": domain.TaskFailed, "s0:l": domain.TaskCancelled, "s1:m": domain.TaskCancelled})
	v, _ := mesh["s0"].GetTask(ctx, ids["s0:r"])
	for _, want := range []string{ids["s7:x"] + " could not be created on shard s7", `shard "s7" did not answer for 10m1s`,
		"shard s7 is down", "gave up on the tree", "--peer-give-up"} {
		if !strings.Contains(v.Task.Error, want) {
			t.Errorf("root's error %q does not say %q", v.Task.Error, want)
		}
	}
	checkOutbox(t, mesh["s0"], 0, 1) // the creation, kept for people to see
	checkOutbox(t, mesh["s1"], 0, 0)
}

// TestOutboxWaitsForSilentShardWithoutBound: with no PeerGiveUp (the
// default of a static topology) a shard that is down is waited for,
// however long.
func TestOutboxWaitsForSilentShardWithoutBound(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMesh(t, "s0", "s1")
	ctx := t.Context()
	r.setDown("s1", true)
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s1:x")}}, {ID: "s1:x", Workload: "f"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(1000 * time.Hour)
	deliverAll(t, mesh, "s0")
	checkOutbox(t, mesh["s0"], 1, 0)
	r.setDown("s1", false)
	c.Advance(time.Minute)
	deliverAll(t, mesh, "s0")
	checkOutbox(t, mesh["s0"], 0, 0)
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s0:r": domain.TaskWaiting, "s1:x": domain.TaskPending})
}

// TestOutboxGivesUpOnSilentDownstream: a result whose downstream's shard
// stops answering is given up on after PeerGiveUp. The tree can never
// complete, so it fails: the root here, naming the shard, the rest here
// cancelled; and once the silent shard is back, the failure sent to it as
// a last word fails its side of the tree too.
func TestOutboxGivesUpOnSilentDownstream(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMeshGivingUp(t, 10*time.Minute, "s0", "s1")
	ctx := t.Context()
	// r(s0) = f(d(s1), s(s0)); d(s1) = f(u(s0)).
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s1:d"), ref("s0:s")}},
		{ID: "s1:d", Workload: "f", Args: []domain.TreeArg{ref("s0:u")}},
		{ID: "s0:u", Workload: "u"},
		{ID: "s0:s", Workload: "s"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	checkOutbox(t, mesh["s0"], 0, 0) // s1's tasks were created at once
	r.setDown("s1", true)
	u, err := mesh["s0"].PollTree(ctx, "w", []string{"u"}, 0)
	if err != nil || u == nil {
		t.Fatalf("PollTree of u: %v %v", u, err)
	}
	if err := mesh["s0"].CompleteTree(ctx, u.ID, "w", u.Attempt, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Minute)
	deliverAll(t, mesh, "s0")
	checkOutbox(t, mesh["s0"], 1, 0)
	c.Advance(5 * time.Minute)
	deliverAll(t, mesh, "s0")
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s0:r": domain.TaskFailed, "s0:s": domain.TaskCancelled, "s0:u": domain.TaskCompleted})
	v, _ := mesh["s0"].GetTask(ctx, ids["s0:r"])
	for _, want := range []string{"task " + ids["s0:u"] + " could not hand its result to task " + ids["s1:d"], `shard "s1" did not answer for 10m0s`} {
		if !strings.Contains(v.Task.Error, want) {
			t.Errorf("root's error %q does not say %q", v.Task.Error, want)
		}
	}
	checkOutbox(t, mesh["s0"], 1, 1) // the result given up on; the last word to d waits

	r.setDown("s1", false)
	c.Advance(time.Minute)
	deliverAll(t, mesh, "s0", "s1", "s0")
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s1:d": domain.TaskFailed})
	checkOutbox(t, mesh["s0"], 0, 1)
	checkOutbox(t, mesh["s1"], 0, 0)
}

// TestOutboxGivesUpOnSilentDownstreamRootElsewhere: when the root is on a
// third shard that answers, giving up on a result fails the root there
// and cancels this shard's part of the tree.
func TestOutboxGivesUpOnSilentDownstreamRootElsewhere(t *testing.T) {
	t.Parallel()
	mesh, r, c := newMeshGivingUp(t, 10*time.Minute, "s0", "s1", "s2")
	ctx := t.Context()
	// r(s2) = f(d(s1), s(s0)); d(s1) = f(u(s0)).
	ids, _, err := mesh["s0"].SubmitTree(ctx, &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s2:r", Workload: "f", Args: []domain.TreeArg{ref("s1:d"), ref("s0:s")}},
		{ID: "s1:d", Workload: "f", Args: []domain.TreeArg{ref("s0:u")}},
		{ID: "s0:u", Workload: "u"},
		{ID: "s0:s", Workload: "s"},
	}}, known)
	if err != nil {
		t.Fatal(err)
	}
	r.setDown("s1", true)
	u, err := mesh["s0"].PollTree(ctx, "w", []string{"u"}, 0)
	if err != nil || u == nil {
		t.Fatalf("PollTree of u: %v %v", u, err)
	}
	if err := mesh["s0"].CompleteTree(ctx, u.ID, "w", u.Attempt, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	c.Advance(11 * time.Minute)
	deliverAll(t, mesh, "s0", "s0", "s2", "s0")
	checkStates(t, mesh, ids, map[string]domain.TaskState{"s2:r": domain.TaskFailed, "s0:s": domain.TaskCancelled, "s0:u": domain.TaskCompleted})
	v, _ := mesh["s2"].GetTask(ctx, ids["s2:r"])
	if !strings.Contains(v.Task.Error, `shard "s1" did not answer`) {
		t.Errorf("root's error %q does not name the silent shard", v.Task.Error)
	}
}

// TestOutboxGiveUpCountsFromStart: a coordinator that was down itself does
// not give up on a shard the moment it is back: the wait counts from its
// start when that is later than the message.
func TestOutboxGiveUpCountsFromStart(t *testing.T) {
	t.Parallel()
	r := &router{shards: map[string]*engine.Engine{}, down: map[string]bool{}, applied: map[engine.MessageKind]int{}}
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := openStore(t)
	cfg := engine.Config{Shard: "s0", Peers: r, Now: c.Now, Jitter: func() float64 { return 0 }, PeerGiveUp: 10 * time.Minute}
	first := newEngine(st, cfg)
	if _, _, err := first.SubmitTree(t.Context(), &domain.TreeSpec{Tasks: []domain.TreeTaskSpec{
		{ID: "s0:r", Workload: "f", Args: []domain.TreeArg{ref("s7:x")}}, {ID: "s7:x", Workload: "f"},
	}}, known); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Hour) // the coordinator is down meanwhile
	again := newEngine(st, cfg)
	r.shards["s0"] = again
	c.Advance(time.Minute)
	deliverAll(t, map[string]*engine.Engine{"s0": again}, "s0")
	checkOutbox(t, again, 1, 0)
	c.Advance(10 * time.Minute)
	deliverAll(t, map[string]*engine.Engine{"s0": again}, "s0")
	checkOutbox(t, again, 0, 1)
}
