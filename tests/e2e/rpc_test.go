package e2e

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/tests/framework/binary"

	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// withToken adds a bearer token to every call of a connect client.
func withToken(token string) connect.ClientOption {
	return connect.WithInterceptors(rpc.Bearer(token))
}

// TestRPCOnTheRESTPort talks to a running coordinator with a real gRPC
// client (HTTP/2 without TLS), with the Connect protocol's plain JSON (what
// curl sends) and with gRPC reflection and health, all on the REST port.
func TestRPCOnTheRESTPort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, append(tokenEnv, "PEER_AUTH_TOKEN=ptok"), "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	var j jobOut
	if s := call(t, "POST", p.URL+"/jobs", "ctok", map[string]any{"workload": "w", "input": map[string]any{"chunks": chunkList(1)}}, &j); s != 201 {
		t.Fatalf("create job: %d", s)
	}
	var tk taskOut
	call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "w1"}, &tk)
	ctx := t.Context()

	// grpc-go, the reference implementation of gRPC, with no stubs of its
	// own: the method's path and the generated messages suffice.
	conn, err := grpc.NewClient(strings.TrimPrefix(p.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ref v1.TaskInfo
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ctok")
	if err := conn.Invoke(gctx, scimeshv1connect.QueueQueryProcedure, &v1.QueryRequest{TaskId: tk.TaskID}, &ref); err != nil {
		t.Fatalf("grpc-go Query: %v", err)
	}
	if ref.TaskId != tk.TaskID || ref.State != "leased" || ref.LeaseOwner != "w1" {
		t.Fatalf("grpc-go Query = %v", &ref)
	}
	err = conn.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wtok"),
		scimeshv1connect.QueueQueryProcedure, &v1.QueryRequest{TaskId: tk.TaskID}, &ref)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("grpc-go Query with the worker token: %v, want PermissionDenied", err)
	}

	// connect-go's gRPC client.
	q := scimeshv1connect.NewQueueClient(rpc.H2CClient(), p.URL, connect.WithGRPC(), withToken("ctok"))
	info, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: tk.TaskID}))
	if err != nil {
		t.Fatalf("gRPC Query: %v", err)
	}
	if m := info.Msg; m.State != "leased" || m.Attempt != 1 || m.LeaseOwner != "w1" || m.LeaseExpiresAt == nil || m.DownstreamId != j.JobID+"-root" {
		t.Fatalf("gRPC Query = %v", m)
	}
	_, err = q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: "s0:none"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Query of an unknown task: %v, want NotFound", err)
	}
	for token, want := range map[string]connect.Code{"": connect.CodeUnauthenticated, "nope": connect.CodeUnauthenticated, "wtok": connect.CodePermissionDenied} {
		opts := []connect.ClientOption{connect.WithGRPC()}
		if token != "" {
			opts = append(opts, withToken(token))
		}
		_, err := scimeshv1connect.NewQueueClient(rpc.H2CClient(), p.URL, opts...).Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: tk.TaskID}))
		if connect.CodeOf(err) != want {
			t.Errorf("Query with token %q: %v, want %v", token, err, want)
		}
	}
	_, err = q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "no tasks") {
		t.Errorf("Submit of an empty tree: %v, want InvalidArgument", err)
	}

	// The worker service: keepalive and log for the lease, then GetLogs.
	w := scimeshv1connect.NewWorkerClient(rpc.H2CClient(), p.URL, connect.WithGRPC(), withToken("wtok"))
	if _, err := w.Keepalive(ctx, connect.NewRequest(&v1.KeepaliveRequest{TaskId: tk.TaskID, WorkerId: "w1", Attempt: 1})); err != nil {
		t.Fatalf("Keepalive: %v", err)
	}
	_, err = w.Keepalive(ctx, connect.NewRequest(&v1.KeepaliveRequest{TaskId: tk.TaskID, WorkerId: "w2", Attempt: 1}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("Keepalive of a lease not held: %v, want FailedPrecondition", err)
	}
	if _, err := w.Log(ctx, connect.NewRequest(&v1.LogRequest{TaskId: tk.TaskID, WorkerId: "w1", Attempt: 1, Lines: []string{"hello", "world"}})); err != nil {
		t.Fatalf("Log: %v", err)
	}
	stream, err := q.GetLogs(ctx, connect.NewRequest(&v1.GetLogsRequest{TaskId: tk.TaskID}))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for stream.Receive() {
		lines = append(lines, stream.Msg().Lines...)
	}
	if err := stream.Err(); err != nil || strings.Join(lines, ",") != "hello,world" {
		t.Fatalf("GetLogs: %v, %v", lines, err)
	}

	// Plain JSON over HTTP/1.1, the Connect protocol: what curl sends.
	var got struct {
		TaskID string `json:"taskId"`
		State  string `json:"state"`
	}
	req, _ := http.NewRequest("POST", p.URL+"/scimesh.v1.Queue/Query", strings.NewReader(`{"task_id": "`+tk.TaskID+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer ctok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeJSON(resp, &got); err != nil || resp.StatusCode != 200 || got.TaskID != tk.TaskID || got.State != "leased" {
		t.Fatalf("JSON Query: %d %+v %v", resp.StatusCode, got, err)
	}
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-s", "-H", "Content-Type: application/json", "-H", "Authorization: Bearer ctok",
			"-d", `{"taskId":"`+tk.TaskID+`"}`, p.URL+"/scimesh.v1.Queue/Query").Output()
		if err != nil || !strings.Contains(string(out), `"state":"leased"`) {
			t.Fatalf("curl Query: %v %s", err, out)
		}
	}

	// Health and reflection.
	hreq, _ := http.NewRequest("POST", p.URL+"/grpc.health.v1.Health/Check", strings.NewReader(`{"service":"scimesh.v1.Queue"}`))
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status string }
	if err := decodeJSON(hresp, &h); err != nil || h.Status != "SERVING_STATUS_SERVING" && h.Status != "SERVING" {
		t.Fatalf("health: %+v %v", h, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Reflection takes the client token: a stream without one is refused.
	anon := grpcreflect.NewClient(rpc.H2CClient(), p.URL, connect.WithGRPC()).NewStream(rctx)
	if _, err := anon.ListServices(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("reflection without a token: %v, want unauthenticated", err)
	}
	_, _ = anon.Close()
	rs := grpcreflect.NewClient(rpc.H2CClient(), p.URL, connect.WithGRPC(), withToken("ctok")).NewStream(rctx)
	names, err := rs.ListServices()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	for _, want := range []string{"scimesh.v1.Queue", "scimesh.v1.Worker", "scimesh.v1.Internal"} {
		if !slices.Contains(namesOf(names), want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	_, _ = rs.Close()
}

func namesOf[T ~string](ns []T) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n)
	}
	return out
}

func decodeJSON(resp *http.Response, v any) error {
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return errors.New(resp.Status)
	}
	return jsonDecode(resp.Body, v)
}

func ref(id string) *v1.Arg { return &v1.Arg{Kind: &v1.Arg_TaskId{TaskId: id}} }
func val(n float64) *v1.Arg { return &v1.Arg{Kind: &v1.Arg_Value{Value: structpb.NewNumberValue(n)}} }

// TestTreeOnOneShard submits a tree over gRPC, runs it as a worker would
// (Poll, Done), and checks that results flow to the root, and that a leaf
// failing for good fails the path to the root and cancels the rest.
func TestTreeOnOneShard(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		treeOnOneShard(t, serveProc(t, dir, tokenEnv, "--db", newDB(t, dir, pg), "--topology", "static:s1=http://127.0.0.1:1"))
	})
}

func treeOnOneShard(t *testing.T, p *binary.Proc) {
	ctx := t.Context()
	q := scimeshv1connect.NewQueueClient(rpc.H2CClient(), p.URL, connect.WithGRPC(), withToken("ctok"))
	w := scimeshv1connect.NewWorkerClient(http.DefaultClient, p.URL, withToken("wtok")) // the Connect protocol

	// sum(a, b, 10) where a = num(1) and b = num(2).
	sub, err := q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:sum", Workload: "sum", Args: []*v1.Arg{ref("s0:a"), ref("s0:b"), val(10)}},
		{Id: "s0:a", Workload: "num", Args: []*v1.Arg{val(1)}},
		{Id: "s0:b", Workload: "num", Args: []*v1.Arg{val(2)}},
	}}))
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	ids := sub.Msg.Ids
	if sub.Msg.RootId != ids["s0:sum"] || len(ids) != 3 || !strings.HasPrefix(ids["s0:a"], "s0:") {
		t.Fatalf("Submit answered %v", sub.Msg)
	}
	// Workers of "sum" get nothing while its upstreams run.
	if got, err := w.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"sum"}})); err != nil || got.Msg.TaskId != "" {
		t.Fatalf("Poll for sum before its inputs: %v %v", got.Msg, err)
	}
	for range 2 {
		got, err := w.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"num"}}))
		if err != nil || got.Msg.TaskId == "" || len(got.Msg.Args) != 1 {
			t.Fatalf("Poll for num: %v %v", got.Msg, err)
		}
		tr := &v1.TaskStateTransition{TaskId: got.Msg.TaskId, WorkerId: "w", Attempt: got.Msg.Attempt, Success: true,
			Result: structpb.NewNumberValue(got.Msg.Args[0].GetNumberValue())}
		if _, err := w.Done(ctx, connect.NewRequest(tr)); err != nil {
			t.Fatalf("Done: %v", err)
		}
		if _, err := w.Done(ctx, connect.NewRequest(tr)); err != nil {
			t.Fatalf("Done replayed: %v", err)
		}
	}
	got, err := w.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"sum"}, WaitSeconds: 5}))
	if err != nil || got.Msg.TaskId != sub.Msg.RootId {
		t.Fatalf("Poll for sum: %v %v", got.Msg, err)
	}
	var total float64
	for _, a := range got.Msg.Args {
		total += a.GetNumberValue()
	}
	if total != 13 {
		t.Fatalf("sum's arguments %v add up to %v, want 1+2+10", got.Msg.Args, total)
	}
	if _, err := w.Done(ctx, connect.NewRequest(&v1.TaskStateTransition{TaskId: got.Msg.TaskId, WorkerId: "w", Attempt: 1,
		Success: true, Result: structpb.NewNumberValue(total)})); err != nil {
		t.Fatal(err)
	}
	info, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.RootId}))
	if err != nil || info.Msg.State != "completed" || info.Msg.Result.GetNumberValue() != 13 || len(info.Msg.UpstreamIds) != 2 {
		t.Fatalf("Query of the root: %v %v", info.Msg, err)
	}

	// A leaf that fails for good fails the path to the root and cancels the rest.
	sub, err = q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:r", Workload: "sum", Args: []*v1.Arg{ref("s0:mid"), ref("s0:ok")}},
		{Id: "s0:mid", Workload: "sum", Args: []*v1.Arg{ref("s0:bad")}},
		{Id: "s0:bad", Workload: "bad", Args: []*v1.Arg{val(0)}},
		{Id: "s0:ok", Workload: "num", Args: []*v1.Arg{val(1)}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := w.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w", Workloads: []string{"bad"}}))
	if err != nil || bad.Msg.TaskId == "" {
		t.Fatalf("Poll for bad: %v %v", bad.Msg, err)
	}
	if _, err := w.Done(ctx, connect.NewRequest(&v1.TaskStateTransition{TaskId: bad.Msg.TaskId, WorkerId: "w", Attempt: 1,
		Error: "line 3: not a molecule", Retryable: false})); err != nil {
		t.Fatal(err)
	}
	for placeholder, want := range map[string]string{"s0:bad": "failed", "s0:mid": "failed", "s0:r": "failed", "s0:ok": "cancelled"} {
		info, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.Ids[placeholder]}))
		if err != nil || info.Msg.State != want {
			t.Errorf("%s after the leaf failed: %v %v, want %s", placeholder, info.Msg.GetState(), err, want)
		}
	}

	// Malformed trees change nothing.
	for name, tasks := range map[string][]*v1.TaskSpec{
		"two roots":     {{Id: "s0:x", Workload: "w"}, {Id: "s0:y", Workload: "w"}},
		"cycle":         {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s0:x")}}, {Id: "s0:x", Workload: "w", Args: []*v1.Arg{ref("s0:y")}}, {Id: "s0:y", Workload: "w", Args: []*v1.Arg{ref("s0:x")}}},
		"dangling":      {{Id: "s0:r", Workload: "w", Args: []*v1.Arg{ref("s0:nope")}}},
		"unknown shard": {{Id: "s9:r", Workload: "w"}},
	} {
		_, err := q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: tasks}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("Submit of %s: %v, want InvalidArgument", name, err)
		}
	}
	if got, _ := w.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "w"})); got.Msg.TaskId != "" {
		t.Errorf("refused trees left a task to poll: %v", got.Msg)
	}
}

// TestWorkerRunsTreeTasks submits a tree and lets a real `scimesh worker`
// run it: each workload gets its resolved args as a JSON array on stdin and
// prints its result as JSON; the root's result is right, and a command that
// fails makes its attempt fail with its stderr in the error and the log.
func TestWorkerRunsTreeTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "scimesh.db"))
	start(t, dir, workerEnv(p.URL), "worker", "--id", "tw", "--concurrency", "1", "--tree-concurrency", "2",
		"--work-dir", filepath.Join(dir, "work"),
		// [1] -> 1, and [a,b,c] -> a+b+c: numbers in, a number out.
		"--workload", `num=tr -d '[] \n'`,
		"--workload", `sum=tr -d '[] \n' | tr ',' '\n' | awk '{s+=$1} END {print s}'`,
		"--workload", `boom=echo "no molecule on line 3" >&2; exit 4`,
		"--workload", `env=printf '"%s|%s"' "$SCIMESH_TOKEN" "$SCIMESH_TASK_ID"`)
	ctx := t.Context()
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, p.URL, withToken("ctok"))
	sub, err := q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:total", Workload: "sum", Args: []*v1.Arg{ref("s0:x"), ref("s0:y"), val(100)}},
		{Id: "s0:x", Workload: "num", Args: []*v1.Arg{val(20)}},
		{Id: "s0:y", Workload: "sum", Args: []*v1.Arg{ref("s0:z"), val(3)}},
		{Id: "s0:z", Workload: "num", Args: []*v1.Arg{val(4)}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	var info *v1.TaskInfo
	workerWaitFor(t, 30*time.Second, "the tree's root to complete", func() bool {
		res, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.RootId}))
		if err != nil {
			t.Fatal(err)
		}
		info = res.Msg
		return info.State == "completed"
	})
	if got := info.Result.GetNumberValue(); got != 127 {
		t.Fatalf("root result %v, want 20 + (4 + 3) + 100 = 127", info.Result)
	}

	// The command sees its task's variables, not the worker's token.
	sub, err = q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:e", Workload: "env"}}}))
	if err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, 30*time.Second, "the env task to complete", func() bool {
		res, _ := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.RootId}))
		info = res.Msg
		return info.State == "completed"
	})
	if got, want := info.Result.GetStringValue(), "|"+sub.Msg.RootId; got != want {
		t.Fatalf("the command saw %q (token|task id), want %q", got, want)
	}

	sub, err = q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
		{Id: "s0:b", Workload: "boom", Args: []*v1.Arg{val(1)}, MaxAttempts: 1},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, 30*time.Second, "the failing task to fail", func() bool {
		res, _ := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.RootId}))
		info = res.Msg
		return info.State == "failed"
	})
	if !strings.Contains(info.Error, "exited with status 4") || !strings.Contains(info.Error, "no molecule on line 3") {
		t.Fatalf("failed task's error %q lacks the exit status or stderr", info.Error)
	}
	var log string
	workerGetText(t, p.URL+"/tasks/"+sub.Msg.RootId+"/logs", &log)
	if !strings.Contains(log, "no molecule on line 3") {
		t.Fatalf("task log %q lacks the command's stderr", log)
	}
}
