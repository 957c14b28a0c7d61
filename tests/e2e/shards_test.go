package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storeopen"
	"github.com/scimesh/scimesh/internal/testenv"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// mesh is a set of coordinators, one per shard, each with its own
// database, that know each other through a static topology.
type mesh struct {
	t     *testing.T
	topo  string
	addrs map[string]string // shard → host:port
	dbs   map[string]string // shard → --db
	procs map[string]*binary.Proc
}

var meshEnv = append([]string{"PEER_AUTH_TOKEN=ptok"}, tokenEnv...)

// startMesh starts a coordinator for each shard, on SQLite files or, with
// pg, on PostgreSQL databases of their own.
func startMesh(t *testing.T, pg bool, shards ...string) *mesh {
	t.Helper()
	m := &mesh{t: t, addrs: map[string]string{}, dbs: map[string]string{}, procs: map[string]*binary.Proc{}}
	var topo []string
	for _, s := range shards {
		m.addrs[s] = testenv.FreeAddr(t)
		m.dbs[s] = newDB(t, t.TempDir(), pg)
		topo = append(topo, s+"=http://"+m.addrs[s])
	}
	m.topo = "static:" + strings.Join(topo, ",")
	for _, s := range shards {
		m.start(s)
	}
	return m
}

func (m *mesh) start(shard string) {
	m.t.Helper()
	m.procs[shard] = serveOn(m.t, m.t.TempDir(), m.addrs[shard], meshEnv,
		"--db", m.dbs[shard], "--shard", shard, "--topology", m.topo)
}

// kill ends a shard's coordinator with SIGKILL.
func (m *mesh) kill(shard string) {
	m.t.Helper()
	p := m.procs[shard]
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		m.t.Fatal(err)
	}
	p.Wait()
}

func (m *mesh) url(shard string) string { return "http://" + m.addrs[shard] }

func (m *mesh) queue(shard string) scimeshv1connect.QueueClient {
	return scimeshv1connect.NewQueueClient(http.DefaultClient, m.url(shard), withToken("ctok"))
}

func (m *mesh) worker(shard string) scimeshv1connect.WorkerClient {
	return scimeshv1connect.NewWorkerClient(http.DefaultClient, m.url(shard), withToken("wtok"))
}

func (m *mesh) internal(shard string) scimeshv1connect.InternalClient {
	return scimeshv1connect.NewInternalClient(http.DefaultClient, m.url(shard), withToken("ptok"))
}

// query returns a task from the shard its ID names.
func (m *mesh) query(id string) (*v1.TaskInfo, error) {
	shard, _, _ := strings.Cut(id, ":")
	res, err := m.queue(shard).Query(m.t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: id}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// meshWait bounds the waits of the mesh tests. A delivery cut short by a
// kill holds its messages for the outbox's 30 s claim before the restarted
// shard tries them again, so the waits are longer than that.
const meshWait = 60 * time.Second

// waitState waits until every task in want (real ID → state) is in its state.
func (m *mesh) waitState(want map[string]string) {
	m.t.Helper()
	var last string
	deadline := time.Now().Add(meshWait)
	for {
		last = ""
		for id, state := range want {
			info, err := m.query(id)
			if err != nil || info.State != state {
				last += fmt.Sprintf("\n  %s: %v %v, want %s", id, info.GetState(), err, state)
			}
		}
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("tasks not in their states after %v:%s", meshWait, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// outbox reads a shard's outbox size from its database.
func (m *mesh) outbox(shard string) store.OutboxStats {
	m.t.Helper()
	st, err := storeopen.Open(m.t.Context(), m.dbs[shard], storeopen.Options{})
	if err != nil {
		m.t.Fatal(err)
	}
	defer st.Close()
	s, err := st.OutboxGetStats(m.t.Context())
	if err != nil {
		m.t.Fatal(err)
	}
	return s
}

// waitOutboxEmpty waits until every shard delivered all its messages, and
// checks that none was given up on.
func (m *mesh) waitOutboxEmpty() {
	m.t.Helper()
	deadline := time.Now().Add(meshWait)
	for shard := range m.dbs {
		for {
			s := m.outbox(shard)
			if s.Dead != 0 {
				m.t.Fatalf("shard %s gave up on %d outbox messages", shard, s.Dead)
			}
			if s.Pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				m.t.Fatalf("shard %s still has %d outbox messages after %v", shard, s.Pending, meshWait)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
}

// TestTreeAcrossShards runs a tree spread over three shards with a real
// worker per shard: every result reaches its downstream on another shard,
// and the root's result is right.
func TestTreeAcrossShards(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		m := startMesh(t, pg, "s0", "s1", "s2")
		for shard := range m.addrs {
			dir := t.TempDir()
			start(t, dir, workerEnv(m.url(shard)), "worker", "--id", "w-"+shard, "--concurrency", "1",
				"--tree-concurrency", "2", "--work-dir", filepath.Join(dir, "work"),
				"--workload", `num=tr -d '[] \n'`,
				"--workload", `sum=tr -d '[] \n' | tr ',' '\n' | awk '{s+=$1} END {print s}'`)
		}
		// total(s0) = x(s1) + y(s2) + 100; y(s2) = z(s0) + 3; z = 4, x = 20.
		// Submitted to s1, which holds only a leaf.
		sub, err := m.queue("s1").Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
			{Id: "s0:total", Workload: "sum", Args: []*v1.Arg{ref("s1:x"), ref("s2:y"), val(100)}},
			{Id: "s1:x", Workload: "num", Args: []*v1.Arg{val(20)}},
			{Id: "s2:y", Workload: "sum", Args: []*v1.Arg{ref("s0:z"), val(3)}},
			{Id: "s0:z", Workload: "num", Args: []*v1.Arg{val(4)}},
		}}))
		if err != nil {
			t.Fatal(err)
		}
		ids := sub.Msg.Ids
		for placeholder, id := range ids {
			if shard, _, _ := strings.Cut(placeholder, ":"); !strings.HasPrefix(id, shard+":") {
				t.Errorf("task %s got ID %s, not on its shard", placeholder, id)
			}
		}
		if sub.Msg.RootId != ids["s0:total"] {
			t.Fatalf("root ID %s, want the ID of s0:total (%s)", sub.Msg.RootId, ids["s0:total"])
		}
		want := map[string]string{}
		for _, id := range ids {
			want[id] = "completed"
		}
		m.waitState(want)
		root, err := m.query(sub.Msg.RootId)
		if err != nil {
			t.Fatal(err)
		}
		if got := root.Result.GetNumberValue(); got != 127 {
			t.Fatalf("root result %v, want 20 + (4 + 3) + 100 = 127", root.Result)
		}
		if got := strings.Join(root.UpstreamIds, ","); got != ids["s1:x"]+","+ids["s2:y"] {
			t.Errorf("root's upstreams %s, want x then y", got)
		}
		y, _ := m.query(ids["s2:y"])
		if y.DownstreamId != sub.Msg.RootId || y.Result.GetNumberValue() != 7 {
			t.Errorf("y on s2: downstream %s result %v, want %s and 7", y.DownstreamId, y.Result, sub.Msg.RootId)
		}
		m.waitOutboxEmpty()
	})
}

// TestOutboxSurvivesKill completes a leaf while the shard of its
// downstream is killed with SIGKILL, then kills the leaf's own shard too
// with the result still in its outbox: once both are back, the result
// reaches the downstream, exactly once.
func TestOutboxSurvivesKill(t *testing.T) {
	t.Parallel()
	m := startMesh(t, false, "s0", "s1")
	ctx := t.Context()
	sub, err := m.queue("s1").Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:root", Workload: "sum", Args: []*v1.Arg{ref("s1:leaf"), val(1)}},
		{Id: "s1:leaf", Workload: "num", Args: []*v1.Arg{val(41)}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	rootID, leafID := sub.Msg.RootId, sub.Msg.Ids["s1:leaf"]
	m.waitState(map[string]string{rootID: "waiting", leafID: "pending"})

	m.kill("s0")
	leaf, err := m.worker("s1").Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w"}))
	if err != nil || leaf.Msg.TaskId != leafID {
		t.Fatalf("Poll on s1: %v %v, want the leaf", leaf.Msg, err)
	}
	// Done succeeds with the downstream's shard down: the result waits in
	// s1's outbox (checked below) instead of being sent before answering.
	if _, err := m.worker("s1").Done(ctx, connect.NewRequest(&v1.TaskStateTransition{TaskId: leafID, WorkerId: "w",
		Attempt: leaf.Msg.Attempt, Success: true, Result: val(41).GetValue()})); err != nil {
		t.Fatalf("Done while the downstream's shard is down: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // a few deliveries fail meanwhile
	if s := m.outbox("s1"); s.Pending != 1 {
		t.Fatalf("s1's outbox holds %d messages while s0 is down, want the one result", s.Pending)
	}
	m.kill("s1")
	m.start("s0")
	m.start("s1")

	m.waitState(map[string]string{rootID: "pending", leafID: "completed"})
	m.waitOutboxEmpty()
	// Delivered again, as after a crash between the receiver's commit and
	// its answer, the result changes nothing; another result is refused.
	in := m.internal("s0")
	if _, err := in.ReportSuccess(ctx, connect.NewRequest(&v1.ReportSuccessRequest{TaskId: rootID, UpstreamId: leafID,
		Result: val(41).GetValue()})); err != nil {
		t.Fatalf("replayed ReportSuccess: %v", err)
	}
	_, err = in.ReportSuccess(ctx, connect.NewRequest(&v1.ReportSuccessRequest{TaskId: rootID, UpstreamId: leafID,
		Result: val(40).GetValue()}))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("ReportSuccess with another result: %v, want AlreadyExists", err)
	}
	st, err := storeopen.Open(ctx, m.dbs["s0"], storeopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	task, err := st.TaskGet(ctx, rootID)
	st.Close()
	if err != nil || task.PendingUpstreams != 0 {
		t.Fatalf("root's count of pending upstreams %d (%v), want 0: the result counted once", task.PendingUpstreams, err)
	}
	root, err := m.worker("s0").Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w"}))
	if err != nil || root.Msg.TaskId != rootID {
		t.Fatalf("Poll on s0: %v %v, want the root", root.Msg, err)
	}
	if len(root.Msg.Args) != 2 || root.Msg.Args[0].GetNumberValue() != 41 || root.Msg.Args[1].GetNumberValue() != 1 {
		t.Fatalf("root's args %v, want [41, 1]", root.Msg.Args)
	}
}

// TestTreeFailureAcrossShards fails a leaf for good: every task on its path
// to the root ends failed and every other task cancelled, on every shard,
// a leased one included, whose worker is then told to stop.
func TestTreeFailureAcrossShards(t *testing.T) {
	t.Parallel()
	m := startMesh(t, false, "s0", "s1", "s2")
	ctx := t.Context()
	// r(s0) = f(a(s1), b(s2)); a(s1) = f(bad(s2), l2(s0)); b(s2) = f(l3(s1)).
	sub, err := m.queue("s0").Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "f", Args: []*v1.Arg{ref("s1:a"), ref("s2:b")}},
		{Id: "s1:a", Workload: "f", Args: []*v1.Arg{ref("s2:bad"), ref("s0:l2")}},
		{Id: "s2:b", Workload: "f", Args: []*v1.Arg{ref("s1:l3")}},
		{Id: "s2:bad", Workload: "bad", Args: []*v1.Arg{val(0)}, MaxAttempts: 1},
		{Id: "s0:l2", Workload: "leaf", Args: []*v1.Arg{val(2)}},
		{Id: "s1:l3", Workload: "leaf", Args: []*v1.Arg{val(3)}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	ids := sub.Msg.Ids
	m.waitState(map[string]string{ids["s2:bad"]: "pending", ids["s0:l2"]: "pending", ids["s1:l3"]: "pending"})
	l2, err := m.worker("s0").Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"leaf"}}))
	if err != nil || l2.Msg.TaskId != ids["s0:l2"] {
		t.Fatalf("Poll of l2: %v %v", l2.Msg, err)
	}
	bad, err := m.worker("s2").Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"bad"}}))
	if err != nil || bad.Msg.TaskId != ids["s2:bad"] {
		t.Fatalf("Poll of bad: %v %v", bad.Msg, err)
	}
	if _, err := m.worker("s2").Done(ctx, connect.NewRequest(&v1.TaskStateTransition{TaskId: bad.Msg.TaskId, WorkerId: "w",
		Attempt: bad.Msg.Attempt, Error: "line 3: not a molecule", Retryable: false})); err != nil {
		t.Fatal(err)
	}
	m.waitState(map[string]string{
		ids["s2:bad"]: "failed", ids["s1:a"]: "failed", ids["s0:r"]: "failed",
		ids["s0:l2"]: "cancelled", ids["s2:b"]: "cancelled", ids["s1:l3"]: "cancelled",
	})
	for _, p := range []string{"s1:a", "s0:r"} {
		info, _ := m.query(ids[p])
		if !strings.Contains(info.Error, ids["s2:bad"]) || !strings.Contains(info.Error, "line 3: not a molecule") {
			t.Errorf("%s's error %q does not name the failed leaf and its cause", p, info.Error)
		}
	}
	_, err = m.worker("s0").Keepalive(ctx, connect.NewRequest(&v1.KeepaliveRequest{TaskId: l2.Msg.TaskId, WorkerId: "w", Attempt: l2.Msg.Attempt}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("Keepalive of a cancelled task: %v, want FailedPrecondition", err)
	}
	m.waitOutboxEmpty()
}

// TestMalformedTreeAcrossShards refuses every malformed tree of the
// contract with InvalidArgument and creates nothing on any shard.
func TestMalformedTreeAcrossShards(t *testing.T) {
	t.Parallel()
	m := startMesh(t, false, "s0", "s1", "s2")
	ctx := t.Context()
	for name, tasks := range map[string][]*v1.TaskSpec{
		"empty":         nil,
		"two roots":     {{Id: "s0:x", Workload: "w", Args: []*v1.Arg{ref("s1:y")}}, {Id: "s1:y", Workload: "w"}, {Id: "s2:z", Workload: "w"}},
		"cycle":         {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s1:x")}}, {Id: "s1:x", Workload: "w", Args: []*v1.Arg{ref("s2:y")}}, {Id: "s2:y", Workload: "w", Args: []*v1.Arg{ref("s1:x")}}},
		"twice":         {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s1:x"), ref("s2:y")}}, {Id: "s1:x", Workload: "w", Args: []*v1.Arg{ref("s2:y")}}, {Id: "s2:y", Workload: "w"}},
		"dangling":      {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s1:x")}}, {Id: "s1:x", Workload: "w", Args: []*v1.Arg{ref("s2:nope")}}},
		"unknown shard": {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s1:x")}}, {Id: "s1:x", Workload: "w", Args: []*v1.Arg{ref("s9:y")}}, {Id: "s9:y", Workload: "w"}},
	} {
		_, err := m.queue("s0").Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: tasks}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("Submit of %s: %v, want InvalidArgument", name, err)
		}
	}
	for shard, db := range m.dbs {
		conn, err := sql.Open("sqlite", strings.TrimPrefix(db, "sqlite:"))
		if err != nil {
			t.Fatal(err)
		}
		var tasks, msgs int
		err = conn.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM outbox)`).Scan(&tasks, &msgs)
		conn.Close()
		if err != nil || tasks != 0 || msgs != 0 {
			t.Errorf("shard %s after refused trees: %d tasks, %d outbox messages (%v); want none", shard, tasks, msgs, err)
		}
	}
}
