package scimeshv1_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	scimeshv1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// TestJSONNames pins the JSON clients send and read (the standard proto3
// mapping): lowerCamelCase names on output, snake_case accepted on input,
// args as plain JSON values or task references.
func TestJSONNames(t *testing.T) {
	t.Parallel()
	value, err := structpb.NewValue(map[string]any{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	spec := &scimeshv1.TaskSpec{
		Id:       "s0:a",
		Workload: "w",
		Args: []*scimeshv1.Arg{
			{Kind: &scimeshv1.Arg_Value{Value: value}},
			{Kind: &scimeshv1.Arg_TaskId{TaskId: "s1:b"}},
		},
		MaxAttempts: 2,
	}
	tests := []struct {
		name string
		msg  proto.Message
		json string // what the server writes; reading it back gives msg
	}{
		{
			name: "TaskSpec",
			msg:  spec,
			json: `{"id":"s0:a","workload":"w","args":[{"value":{"x":1}},{"taskId":"s1:b"}],"maxAttempts":2}`,
		},
		{
			name: "SubmitResponse",
			msg:  &scimeshv1.SubmitResponse{Ids: map[string]string{"s0:a": "s0:t1"}, RootId: "s0:t1"},
			json: `{"ids":{"s0:a":"s0:t1"},"rootId":"s0:t1"}`,
		},
		{
			name: "empty Task from Poll",
			msg:  &scimeshv1.Task{},
			json: `{}`,
		},
		{
			name: "ReportSuccessRequest",
			msg: &scimeshv1.ReportSuccessRequest{
				TaskId: "s0:t1", UpstreamId: "s1:t2", Result: structpb.NewListValue(&structpb.ListValue{
					Values: []*structpb.Value{structpb.NewStringValue("a"), structpb.NewNullValue()},
				}),
			},
			json: `{"taskId":"s0:t1","upstreamId":"s1:t2","result":["a",null]}`,
		},
		{
			// offset is optional: an offset of 0 (a first batch) is sent,
			// not taken for unset.
			name: "LogRequest with offset 0",
			msg:  &scimeshv1.LogRequest{TaskId: "s0:t1", WorkerId: "w1", Attempt: 1, Lines: []string{"a"}, Offset: proto.Int64(0)},
			json: `{"taskId":"s0:t1","workerId":"w1","attempt":1,"lines":["a"],"offset":"0"}`,
		},
		{
			name: "LogRequest without offset",
			msg:  &scimeshv1.LogRequest{TaskId: "s0:t1", WorkerId: "w1", Attempt: 1, Lines: []string{"a"}},
			json: `{"taskId":"s0:t1","workerId":"w1","attempt":1,"lines":["a"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := protojson.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !sameJSON(t, b, []byte(tt.json)) {
				t.Errorf("marshal:\ngot  %s\nwant %s", b, tt.json)
			}
			back := tt.msg.ProtoReflect().New().Interface()
			if err := protojson.Unmarshal([]byte(tt.json), back); err != nil {
				t.Fatalf("unmarshal %s: %v", tt.json, err)
			}
			if !proto.Equal(back, tt.msg) {
				t.Errorf("unmarshal %s:\ngot  %v\nwant %v", tt.json, back, tt.msg)
			}
		})
	}

	t.Run("snake_case input", func(t *testing.T) {
		t.Parallel()
		in := `{"id":"s0:a","workload":"w","args":[{"value":{"x":1}},{"task_id":"s1:b"}],"max_attempts":2}`
		var got scimeshv1.TaskSpec
		if err := protojson.Unmarshal([]byte(in), &got); err != nil {
			t.Fatalf("unmarshal %s: %v", in, err)
		}
		if !proto.Equal(&got, spec) {
			t.Errorf("unmarshal %s:\ngot  %v\nwant %v", in, &got, spec)
		}
	})
}

// TestConnectJSON shows the generated handlers answer the Connect protocol's
// plain JSON POST, the form SPEC.md §5 promises works with curl.
func TestConnectJSON(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(scimeshv1connect.NewQueueHandler(queryStub{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+scimeshv1connect.QueueQueryProcedure, "application/json",
		strings.NewReader(`{"task_id":"s0:t1"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"taskId":"s0:t1","state":"completed","result":{"best":[1,2]},"upstreamIds":["s1:t2"]}`
	if resp.StatusCode != http.StatusOK || !sameJSON(t, body, []byte(want)) {
		t.Errorf("POST %s:\ngot  %d %s\nwant 200 %s", scimeshv1connect.QueueQueryProcedure, resp.StatusCode, body, want)
	}
}

// queryStub answers Query with a fixed completed task.
type queryStub struct {
	scimeshv1connect.UnimplementedQueueHandler
}

func (queryStub) Query(_ context.Context, req *connect.Request[scimeshv1.QueryRequest]) (*connect.Response[scimeshv1.TaskInfo], error) {
	result, err := structpb.NewValue(map[string]any{"best": []any{1, 2}})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&scimeshv1.TaskInfo{
		TaskId:      req.Msg.GetTaskId(),
		State:       "completed",
		Result:      result,
		UpstreamIds: []string{"s1:t2"},
	}), nil
}

// sameJSON reports whether a and b hold the same JSON value, whatever the
// spacing and key order (protojson's output spacing is deliberately unstable).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("invalid JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
