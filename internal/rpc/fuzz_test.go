package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/scimesh/scimesh/internal/domain"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
)

// The fuzz targets below feed arbitrary bytes to the request decoders of
// the scimesh.v1 services, in both wire forms (protobuf binary, as gRPC and
// Connect's proto codec read it, and protojson, as Connect's JSON codec
// does), then run the conversions the handlers run. Whatever decodes
// survives a round trip through both forms; a conversion either succeeds
// with values that are JSON and convert back to what came in, or fails
// with domain.ErrInvalidArgument — a 400, never a 500.

// wireForms returns the messages data decodes to, as binary and as JSON,
// after checking that each survives re-encoding in both forms.
func wireForms[M proto.Message](t *testing.T, data []byte, newM func() M) []M {
	t.Helper()
	var out []M
	if m := newM(); proto.Unmarshal(data, m) == nil {
		out = append(out, m)
	}
	if m := newM(); (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m) == nil {
		out = append(out, m)
	}
	det := proto.MarshalOptions{Deterministic: true}
	for _, m := range out {
		b, err := det.Marshal(m)
		if err != nil {
			t.Fatalf("decoded %T does not encode: %v", m, err)
		}
		back := newM()
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatalf("%T encoded does not decode: %v", m, err)
		}
		if b2, _ := det.Marshal(back); !bytes.Equal(b, b2) {
			t.Fatalf("%T changed through binary: %v, then %v", m, m, back)
		}
		// Through JSON, what JSON holds survives: not unknown fields, nor
		// the number of a null (google.protobuf.NullValue), which binary
		// carries and JSON writes as null.
		j, err := protojson.Marshal(m)
		if err != nil {
			continue // a value JSON cannot hold (NaN, a timestamp out of range): refused as JSON, checked below
		}
		fromJSON := newM()
		if err := protojson.Unmarshal(j, fromJSON); err != nil {
			t.Fatalf("%T as JSON %s does not decode: %v", m, j, err)
		}
		j2, err := protojson.Marshal(fromJSON)
		if err != nil || !bytes.Equal(compact(t, j), compact(t, j2)) {
			t.Fatalf("%T changed through JSON: %s, then %s (%v)", m, j, j2, err)
		}
	}
	return out
}

// addForms seeds f with each message in both wire forms (binary only for
// those JSON cannot hold), and with data that is neither.
func addForms(f *testing.F, msgs ...proto.Message) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if j, err := protojson.Marshal(m); err == nil { // some invalid ones have no JSON form
			f.Add(j)
		}
	}
	f.Add([]byte(`{"tasks": [{"id": 1}]}`))
	f.Add([]byte(`not a message`))
	f.Add([]byte{0x0a, 0xff, 0xff})
}

func mustInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("%s: %v, want domain.ErrInvalidArgument", what, err)
	}
}

// checkValueJSON checks that the JSON b a Value v converted to is compact
// JSON that converts back to a Value that converts to b again.
func checkValueJSON(t *testing.T, what string, v *structpb.Value, b []byte) {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil || !bytes.Equal(c.Bytes(), b) {
		t.Fatalf("%s: %q is not compact JSON (%v)", what, b, err)
	}
	back, err := jsonValue(b)
	if err != nil {
		t.Fatalf("%s: %q does not convert back: %v", what, b, err)
	}
	again, err := valueJSON(back)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("%s: %v → %q → %q (%v): not the same JSON", what, v, b, again, err)
	}
}

// compact is JSON b without insignificant space (protojson adds some at
// random, so that nobody relies on its spacing).
func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatalf("protojson wrote %q, which is not JSON: %v", b, err)
	}
	return c.Bytes()
}

func value(v any) *structpb.Value {
	s, err := structpb.NewValue(v)
	if err != nil {
		panic(err)
	}
	return s
}

func valArg(v any) *v1.Arg     { return &v1.Arg{Kind: &v1.Arg_Value{Value: value(v)}} }
func refArg(id string) *v1.Arg { return &v1.Arg{Kind: &v1.Arg_TaskId{TaskId: id}} }

// FuzzSubmitRequest: Queue.Submit's tree, converted by treeSpec and
// planned by the domain.
func FuzzSubmitRequest(f *testing.F) {
	addForms(f,
		&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
			{Id: "s0:sum", Workload: "sum", Args: []*v1.Arg{refArg("s1:a"), valArg(10.5)}, MaxAttempts: 2, Priority: -3},
			{Id: "s1:a", Workload: "num", Args: []*v1.Arg{valArg(map[string]any{"k": []any{1, "x", nil, true}})}, LeaseSeconds: 30},
		}},
		&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "w", Args: []*v1.Arg{{}}}}},
		&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "w", Args: []*v1.Arg{{Kind: &v1.Arg_Value{}}}}}},
		&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "w", Args: []*v1.Arg{refArg("s0:x")}, MaxAttempts: 1000}}},
		&v1.SubmitRequest{},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range wireForms(t, data, func() *v1.SubmitRequest { return &v1.SubmitRequest{} }) {
			spec, err := treeSpec(m)
			mustInvalid(t, "treeSpec", err)
			if err != nil {
				continue
			}
			for i, task := range spec.Tasks {
				for j, a := range task.Args {
					if v := m.Tasks[i].Args[j].GetValue(); v != nil {
						checkValueJSON(t, "arg", v, a.Value)
					} else if a.Value != nil {
						t.Fatalf("task %d arg %d: a reference converted to the value %q", i, j, a.Value)
					}
				}
			}
			_, err = spec.Plan(func(string) bool { return true })
			mustInvalid(t, "Plan", err)
		}
	})
}

// FuzzSubmitTaskRequest: Internal.SubmitTask's tasks, converted by
// placedTasks, checked as the receiving engine checks them, and sent back
// by placedTaskProto, the sender's conversion, unchanged.
func FuzzSubmitTaskRequest(f *testing.F) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	good := &v1.SubmitTaskRequest{Tasks: []*v1.PlacedTask{
		{TaskId: "s1:r", RootId: "s1:r", Workload: "sum", Args: []*v1.Arg{refArg("s1:r-t1"), valArg("x")},
			MaxAttempts: 3, LeaseSeconds: 60, TreeCreatedAt: timestamppb.New(created)},
		{TaskId: "s1:r-t1", RootId: "s1:r", DownstreamId: "s1:r", Workload: "num", Args: []*v1.Arg{valArg(1)},
			MaxAttempts: 3, LeaseSeconds: 60, Position: 1, TreeCreatedAt: timestamppb.New(created)},
	}}
	addForms(f, good,
		&v1.SubmitTaskRequest{Tasks: []*v1.PlacedTask{{TaskId: "s1:x", Args: []*v1.Arg{{}}}}},
		&v1.SubmitTaskRequest{},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range wireForms(t, data, func() *v1.SubmitTaskRequest { return &v1.SubmitTaskRequest{} }) {
			placed, err := placedTasks(m)
			mustInvalid(t, "placedTasks", err)
			if err != nil {
				continue
			}
			for i, p := range placed {
				for j, a := range p.Args {
					if v := m.Tasks[i].Args[j].GetValue(); v != nil {
						checkValueJSON(t, "arg", v, a.Value)
					}
				}
				spec := domain.TreeTaskSpec{ID: p.ID, Workload: p.Workload, Args: p.Args, MaxAttempts: p.MaxAttempts,
					LeaseSeconds: p.LeaseSeconds, Priority: p.Priority}
				if err := spec.Check(); err != nil {
					mustInvalid(t, "Check", err)
					continue // the engine refuses it before anything else
				}
				pt, err := placedTaskProto(p)
				if err != nil {
					t.Fatalf("task %d converted but does not convert back: %v", i, err)
				}
				again, err := placedTasks(&v1.SubmitTaskRequest{Tasks: []*v1.PlacedTask{pt}})
				if err != nil {
					t.Fatalf("task %d sent back is refused: %v", i, err)
				}
				q := again[0]
				if !q.TreeCreatedAt.Equal(p.TreeCreatedAt) {
					t.Fatalf("task %d: tree_created_at %v came back %v", i, p.TreeCreatedAt, q.TreeCreatedAt)
				}
				q.TreeCreatedAt = p.TreeCreatedAt
				if !reflect.DeepEqual(q, p) {
					t.Fatalf("task %d changed on its way back:\n%+v\n%+v", i, p, q)
				}
			}
		}
	})
}

// FuzzTaskStateTransition: Worker.Done's outcome: a result converted by
// resultJSON, the lease checked as the engine checks it.
func FuzzTaskStateTransition(f *testing.F) {
	addForms(f,
		&v1.TaskStateTransition{TaskId: "s0:t", WorkerId: "w1", Attempt: 1, Success: true, Result: value(map[string]any{"best": []any{1.5, -2}})},
		&v1.TaskStateTransition{TaskId: "s0:t", WorkerId: "w1", Attempt: 2, Error: "line 3: bad", Retryable: true},
		&v1.TaskStateTransition{TaskId: "s0:t", WorkerId: "w 1", Attempt: -1, Success: true},
		&v1.TaskStateTransition{Success: true, Result: &structpb.Value{}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range wireForms(t, data, func() *v1.TaskStateTransition { return &v1.TaskStateTransition{} }) {
			mustInvalid(t, "CheckLeaseRequest", domain.CheckLeaseRequest(m.WorkerId, int(m.Attempt)))
			if !m.Success {
				continue
			}
			b, err := resultJSON(m.Result)
			mustInvalid(t, "resultJSON", err)
			if err == nil {
				checkValueJSON(t, "result", m.Result, b)
			}
		}
	})
}

// FuzzInternalRequests: Internal.ReportSuccess (its result converted by
// resultJSON), SetFailed and SetCancel, whose fields the handlers pass on
// as they are.
func FuzzInternalRequests(f *testing.F) {
	addForms(f,
		&v1.ReportSuccessRequest{TaskId: "s1:r", UpstreamId: "s0:r-t1", Result: value([]any{"a", 1, nil})},
		&v1.ReportSuccessRequest{TaskId: "s1:r", UpstreamId: "s0:r-t1"},
		&v1.SetFailedRequest{TaskId: "s1:r", UpstreamId: "s0:r-t1", Error: "upstream task s0:r-t1 failed: boom"},
		&v1.SetCancelRequest{TaskId: "s1:r", Reason: "task s0:r-t2 of the tree failed"},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range wireForms(t, data, func() *v1.ReportSuccessRequest { return &v1.ReportSuccessRequest{} }) {
			b, err := resultJSON(m.Result)
			mustInvalid(t, "resultJSON", err)
			if err == nil {
				checkValueJSON(t, "result", m.Result, b)
			}
		}
		wireForms(t, data, func() *v1.SetFailedRequest { return &v1.SetFailedRequest{} })
		wireForms(t, data, func() *v1.SetCancelRequest { return &v1.SetCancelRequest{} })
	})
}

// FuzzWorkerRequests: Worker.Poll, Keepalive and Log, whose fields the
// handlers pass on as they are (Poll's wait_seconds as a duration), checked
// as the engine checks them.
func FuzzWorkerRequests(f *testing.F) {
	addForms(f,
		&v1.PollRequest{WorkerId: "w1", Workloads: []string{"sum", "num"}, WaitSeconds: 30},
		&v1.PollRequest{WorkerId: "", WaitSeconds: -1},
		&v1.KeepaliveRequest{TaskId: "s0:t", WorkerId: "w1", Attempt: 3},
		&v1.LogRequest{TaskId: "s0:t", WorkerId: "w1", Attempt: 1, Lines: []string{"started", "", "ünïcode"}},
		&v1.LogRequest{TaskId: "s0:t", WorkerId: "w1", Attempt: 1, Lines: []string{"again"}, Offset: proto.Int64(0)},
		&v1.LogRequest{TaskId: "s0:t", WorkerId: "w1", Attempt: 1, Offset: proto.Int64(-1)},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range wireForms(t, data, func() *v1.PollRequest { return &v1.PollRequest{} }) {
			if d := time.Duration(m.WaitSeconds) * time.Second; d/time.Second != time.Duration(m.WaitSeconds) {
				t.Fatalf("wait_seconds %d overflows as a duration: %v", m.WaitSeconds, d)
			}
		}
		for _, m := range wireForms(t, data, func() *v1.KeepaliveRequest { return &v1.KeepaliveRequest{} }) {
			mustInvalid(t, "CheckLeaseRequest", domain.CheckLeaseRequest(m.WorkerId, int(m.Attempt)))
		}
		for _, m := range wireForms(t, data, func() *v1.LogRequest { return &v1.LogRequest{} }) {
			mustInvalid(t, "CheckLeaseRequest", domain.CheckLeaseRequest(m.WorkerId, int(m.Attempt)))
		}
	})
}

// FuzzQueueRequests: Queue.Query and GetLogs, whose task IDs the handlers
// pass on as they are.
func FuzzQueueRequests(f *testing.F) {
	addForms(f,
		&v1.QueryRequest{TaskId: "s0:0190abcdef-t1"},
		&v1.GetLogsRequest{TaskId: "s0:t", Follow: true},
		&v1.QueryRequest{TaskId: "not an id"},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		wireForms(t, data, func() *v1.QueryRequest { return &v1.QueryRequest{} })
		wireForms(t, data, func() *v1.GetLogsRequest { return &v1.GetLogsRequest{} })
	})
}
