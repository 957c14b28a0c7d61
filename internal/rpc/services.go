package rpc

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

type queue struct {
	scimeshv1connect.UnimplementedQueueHandler
	e     *engine.Engine
	known func(string) bool
}

// Submit creates one connected tree, its tasks on their shards.
func (q *queue) Submit(ctx context.Context, req *connect.Request[v1.SubmitRequest]) (*connect.Response[v1.SubmitResponse], error) {
	spec, err := treeSpec(req.Msg)
	if err != nil {
		return nil, err
	}
	ids, root, err := q.e.SubmitTree(ctx, spec, q.known)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.SubmitResponse{Ids: ids, RootId: root}), nil
}

// treeSpec is a Submit request as the domain has it, for the domain to
// validate.
func treeSpec(m *v1.SubmitRequest) (*domain.TreeSpec, error) {
	spec := &domain.TreeSpec{Tasks: make([]domain.TreeTaskSpec, len(m.Tasks))}
	for i, t := range m.Tasks {
		args, err := treeArgs(t.Id, t.Args)
		if err != nil {
			return nil, err
		}
		spec.Tasks[i] = domain.TreeTaskSpec{ID: t.Id, Workload: t.Workload, Args: args, MaxAttempts: int(t.MaxAttempts),
			LeaseSeconds: int(t.LeaseSeconds), Priority: int(t.Priority)}
	}
	return spec, nil
}

// treeArgs are a task's args as the domain has them: a value as compact
// JSON, a task ID as a reference. An arg with neither stays empty, for the
// domain to refuse with the task's context.
func treeArgs(taskID string, args []*v1.Arg) ([]domain.TreeArg, error) {
	out := make([]domain.TreeArg, len(args))
	for j, a := range args {
		switch k := a.Kind.(type) {
		case *v1.Arg_TaskId:
			out[j].Ref = k.TaskId
		case *v1.Arg_Value:
			b, err := valueJSON(k.Value)
			if err != nil {
				return nil, domain.Invalidf("task %q arg %d: %v", taskID, j, err)
			}
			out[j].Value = b
		}
	}
	return out, nil
}

// protoArgs are domain args as messages: the inverse of treeArgs.
func protoArgs(args []domain.TreeArg) ([]*v1.Arg, error) {
	out := make([]*v1.Arg, len(args))
	for j, a := range args {
		out[j] = &v1.Arg{Kind: &v1.Arg_TaskId{TaskId: a.Ref}}
		if a.Ref == "" {
			v, err := jsonValue(a.Value)
			if err != nil {
				return nil, fmt.Errorf("arg %d: %w", j, err)
			}
			out[j].Kind = &v1.Arg_Value{Value: v}
		}
	}
	return out, nil
}

// valueJSON is v as compact JSON.
func valueJSON(v *structpb.Value) ([]byte, error) {
	if v == nil {
		return nil, errors.New("a value argument needs a value")
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// resultJSON is a result sent as a Value (by a worker, or by another
// shard for an upstream) as compact JSON; a Value that is no JSON value
// is ErrInvalidArgument.
func resultJSON(v *structpb.Value) ([]byte, error) {
	b, err := valueJSON(v)
	if err != nil {
		return nil, domain.Invalidf("result: %v", err)
	}
	return b, nil
}

// jsonValue is JSON as a protobuf Value.
func jsonValue(b []byte) (*structpb.Value, error) {
	v := &structpb.Value{}
	if err := protojson.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// Query returns a task of this shard. A chunk task's result is its CSV
// output as a string; a job's stitch task's is the sha256 of the job's
// final CSV, in hex. A job's stitch task lists the job's chunk tasks as
// its upstream_ids, by chunk index: the first engine.MaxStitchUpstreams of
// them, with the whole count in the Scimesh-Upstream-Count header.
func (q *queue) Query(ctx context.Context, req *connect.Request[v1.QueryRequest]) (*connect.Response[v1.TaskInfo], error) {
	v, err := q.e.GetTask(ctx, req.Msg.TaskId)
	if err != nil {
		return nil, err
	}
	t := v.Task
	info := &v1.TaskInfo{
		TaskId: t.ID, Workload: t.Workload, State: string(t.State),
		Attempt: int32(t.Attempt), MaxAttempts: int32(t.MaxAttempts), LeaseOwner: t.LeaseOwner,
		CreatedAt: stamp(t.CreatedAt), UpdatedAt: stamp(t.UpdatedAt), Error: t.Error,
		DownstreamId: t.DownstreamID,
	}
	if t.State == domain.TaskLeased {
		info.LeaseExpiresAt = stamp(t.LeaseExpiresAt)
	}
	if t.State == domain.TaskCompleted {
		switch t.Kind {
		case domain.KindTree:
			if info.Result, err = jsonValue(t.Result); err != nil {
				return nil, err
			}
		case domain.KindStitch:
			info.Result = structpb.NewStringValue(hex.EncodeToString(t.Result))
		default:
			info.Result = structpb.NewStringValue(string(t.Result))
		}
	}
	total := -1
	switch {
	case t.Kind == domain.KindTree:
		if info.UpstreamIds, err = q.e.ListTreeArgs(ctx, t.ID); err != nil {
			return nil, err
		}
	case t.Kind == domain.KindStitch && v.Job != nil:
		info.UpstreamIds, total = engine.StitchUpstreams(v.Job, engine.MaxStitchUpstreams)
	}
	resp := connect.NewResponse(info)
	if total >= 0 {
		// The whole count, since a job of more than MaxStitchUpstreams
		// chunks lists only its first ones.
		resp.Header().Set(upstreamCountHeader, strconv.Itoa(total))
	}
	return resp, nil
}

// upstreamCountHeader is the response header of Query that gives how many
// upstreams a job's stitch task has: upstream_ids lists only the first
// engine.MaxStitchUpstreams of them.
const upstreamCountHeader = "Scimesh-Upstream-Count"

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// GetLogs sends the task's log, a message per run of lines of one attempt,
// and with follow keeps sending new lines until the task is final.
func (q *queue) GetLogs(ctx context.Context, req *connect.Request[v1.GetLogsRequest], stream *connect.ServerStream[v1.LogChunk]) error {
	err := q.e.FollowLogs(ctx, req.Msg.TaskId, req.Msg.Follow, func(lines []domain.LogLine) error {
		var chunk *v1.LogChunk
		for _, l := range lines {
			if chunk != nil && chunk.Attempt != int32(l.Attempt) {
				if err := stream.Send(chunk); err != nil {
					return err
				}
				chunk = nil
			}
			if chunk == nil {
				chunk = &v1.LogChunk{TaskId: req.Msg.TaskId, Attempt: int32(l.Attempt)}
			}
			chunk.Lines = append(chunk.Lines, l.Line)
		}
		if chunk == nil {
			return nil
		}
		return stream.Send(chunk)
	})
	if ctx.Err() != nil {
		return nil // the caller went away or the server is stopping
	}
	return err
}

type worker struct {
	scimeshv1connect.UnimplementedWorkerHandler
	e *engine.Engine
}

// Poll leases a runnable tree task with its arguments resolved; an empty
// Task when there is none within wait_seconds.
func (w *worker) Poll(ctx context.Context, req *connect.Request[v1.PollRequest]) (*connect.Response[v1.Task], error) {
	m := req.Msg
	t, err := w.e.PollTree(ctx, m.WorkerId, m.Workloads, time.Duration(m.WaitSeconds)*time.Second)
	if err != nil || t == nil {
		return connect.NewResponse(&v1.Task{}), err
	}
	out := &v1.Task{TaskId: t.ID, Workload: t.Workload, Attempt: int32(t.Attempt), LeaseExpiresAt: stamp(t.LeaseExpiresAt)}
	for _, a := range t.Args {
		v, err := jsonValue(a)
		if err != nil {
			return nil, err
		}
		out.Args = append(out.Args, v)
	}
	return connect.NewResponse(out), nil
}

// Done records a worker's outcome for its lease and returns: the result,
// handed to the downstream task in the same transaction when it is on this
// shard, else by the outbox; or a failure (retried while retryable and
// attempts remain; else the path to the root fails and the rest of the
// tree is cancelled, on other shards by the outbox).
func (w *worker) Done(ctx context.Context, req *connect.Request[v1.TaskStateTransition]) (*connect.Response[emptypb.Empty], error) {
	m := req.Msg
	var err error
	if m.Success {
		var result []byte
		if result, err = resultJSON(m.Result); err != nil {
			return nil, err
		}
		err = w.e.CompleteTree(ctx, m.TaskId, m.WorkerId, int(m.Attempt), result)
	} else {
		_, err = w.e.FailTask(ctx, engine.FailTaskParams{TaskID: m.TaskId, WorkerID: m.WorkerId, Attempt: int(m.Attempt), Error: m.Error, Retryable: m.Retryable})
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// Keepalive renews the lease held by (worker_id, attempt).
func (w *worker) Keepalive(ctx context.Context, req *connect.Request[v1.KeepaliveRequest]) (*connect.Response[emptypb.Empty], error) {
	m := req.Msg
	if _, err := w.e.RenewLease(ctx, m.TaskId, m.WorkerId, int(m.Attempt)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// Log appends lines to the task's log for the lease (worker_id, attempt).
func (w *worker) Log(ctx context.Context, req *connect.Request[v1.LogRequest]) (*connect.Response[emptypb.Empty], error) {
	m := req.Msg
	// The engine refuses a negative offset and skips the positions it
	// already holds; an unset one (nil) appends every line.
	err := w.e.AppendLogs(ctx, engine.AppendLogsParams{TaskID: m.TaskId, WorkerID: m.WorkerId, Attempt: int(m.Attempt), Lines: m.Lines, Offset: m.Offset})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// internal applies the messages other shards' outboxes deliver; each call
// is idempotent (see internal.proto).
type internal struct {
	scimeshv1connect.UnimplementedInternalHandler
	e *engine.Engine
}

// SubmitTask creates a tree's tasks on this shard.
func (in *internal) SubmitTask(ctx context.Context, req *connect.Request[v1.SubmitTaskRequest]) (*connect.Response[v1.SubmitTaskResponse], error) {
	placed, err := placedTasks(req.Msg)
	if err != nil {
		return nil, err
	}
	if err := in.e.AcceptTasks(ctx, placed); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.SubmitTaskResponse{}), nil
}

// placedTasks is a SubmitTask request as the engine has it, for the
// engine to validate: the inverse of placedTaskProto.
func placedTasks(m *v1.SubmitTaskRequest) ([]engine.PlacedTask, error) {
	placed := make([]engine.PlacedTask, len(m.Tasks))
	for i, t := range m.Tasks {
		args, err := treeArgs(t.TaskId, t.Args)
		if err != nil {
			return nil, err
		}
		placed[i] = engine.PlacedTask{
			ID: t.TaskId, TreeID: t.RootId, DownstreamID: t.DownstreamId, Workload: t.Workload, Args: args,
			MaxAttempts: int(t.MaxAttempts), LeaseSeconds: int(t.LeaseSeconds), Priority: int(t.Priority),
			TreeCreatedAt: t.TreeCreatedAt.AsTime(), Position: int(t.Position), Owner: t.Owner,
		}
	}
	return placed, nil
}

// ReportSuccess hands an upstream's result to its downstream on this shard.
func (in *internal) ReportSuccess(ctx context.Context, req *connect.Request[v1.ReportSuccessRequest]) (*connect.Response[v1.ReportSuccessResponse], error) {
	m := req.Msg
	result, err := resultJSON(m.Result)
	if err != nil {
		return nil, err
	}
	if err := in.e.ReportSuccess(ctx, m.TaskId, m.UpstreamId, result); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ReportSuccessResponse{}), nil
}

// SetFailed fails a task of this shard whose upstream failed for good.
func (in *internal) SetFailed(ctx context.Context, req *connect.Request[v1.SetFailedRequest]) (*connect.Response[v1.SetFailedResponse], error) {
	m := req.Msg
	if err := in.e.ReportFailure(ctx, m.TaskId, m.UpstreamId, m.Error); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.SetFailedResponse{}), nil
}

// SetCancel cancels a task of this shard and its running upstreams.
func (in *internal) SetCancel(ctx context.Context, req *connect.Request[v1.SetCancelRequest]) (*connect.Response[v1.SetCancelResponse], error) {
	if err := in.e.CancelTask(ctx, req.Msg.TaskId, req.Msg.Reason); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.SetCancelResponse{}), nil
}
