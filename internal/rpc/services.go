package rpc

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// errTrees answers the calls of task trees, which are not built yet.
var errTrees = connect.NewError(connect.CodeUnimplemented,
	errors.New("task trees across shards are not built yet; use the REST API's jobs"))

type queue struct {
	scimeshv1connect.UnimplementedQueueHandler
	e *engine.Engine
}

func (q *queue) Submit(context.Context, *connect.Request[v1.SubmitRequest]) (*connect.Response[v1.SubmitResponse], error) {
	return nil, errTrees
}

// Query returns a task of this shard. A chunk task's result is its CSV
// output as a string; a job's stitch task's is the sha256 of the job's
// final CSV, in hex.
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
		result := string(t.Result)
		if t.Kind == domain.KindStitch {
			result = hex.EncodeToString(t.Result)
		}
		info.Result = structpb.NewStringValue(result)
	}
	return connect.NewResponse(info), nil
}

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// GetLogs sends the task's log, a message per run of lines of one attempt,
// and with follow keeps sending new lines until the task is final.
func (q *queue) GetLogs(ctx context.Context, req *connect.Request[v1.GetLogsRequest], stream *connect.ServerStream[v1.LogChunk]) error {
	const page = 1000
	var after int64
	for {
		p, err := q.e.Logs(ctx, req.Msg.TaskId, after, page)
		if err != nil {
			return err
		}
		var chunk *v1.LogChunk
		flush := func() error {
			if chunk == nil {
				return nil
			}
			err := stream.Send(chunk)
			chunk = nil
			return err
		}
		for _, l := range p.Lines {
			if chunk != nil && chunk.Attempt != int32(l.Attempt) {
				if err := flush(); err != nil {
					return err
				}
			}
			if chunk == nil {
				chunk = &v1.LogChunk{TaskId: req.Msg.TaskId, Attempt: int32(l.Attempt)}
			}
			chunk.Lines = append(chunk.Lines, l.Line)
			after = l.ID
		}
		if err := flush(); err != nil {
			return err
		}
		if len(p.Lines) == page {
			continue
		}
		if !req.Msg.Follow || p.Final {
			return nil
		}
		q.e.WaitLogs(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return nil
		}
	}
}

type worker struct {
	scimeshv1connect.UnimplementedWorkerHandler
	e *engine.Engine
}

func (w *worker) Poll(context.Context, *connect.Request[v1.PollRequest]) (*connect.Response[v1.Task], error) {
	return nil, errTrees
}

func (w *worker) Done(context.Context, *connect.Request[v1.TaskStateTransition]) (*connect.Response[emptypb.Empty], error) {
	return nil, errTrees
}

// Keepalive renews the lease held by (worker_id, attempt).
func (w *worker) Keepalive(ctx context.Context, req *connect.Request[v1.KeepaliveRequest]) (*connect.Response[emptypb.Empty], error) {
	m := req.Msg
	if !domain.ValidWorkerID(m.WorkerId) {
		return nil, domain.Invalidf("worker_id %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", m.WorkerId)
	}
	if _, err := w.e.Heartbeat(ctx, m.TaskId, m.WorkerId, int(m.Attempt)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// Log appends lines to the task's log for the lease (worker_id, attempt).
func (w *worker) Log(ctx context.Context, req *connect.Request[v1.LogRequest]) (*connect.Response[emptypb.Empty], error) {
	m := req.Msg
	err := w.e.AppendLogs(ctx, engine.AppendLogsParams{TaskID: m.TaskId, WorkerID: m.WorkerId, Attempt: int(m.Attempt), Lines: m.Lines})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

type internal struct {
	scimeshv1connect.UnimplementedInternalHandler
}

func (internal) SubmitTask(context.Context, *connect.Request[v1.SubmitTaskRequest]) (*connect.Response[v1.SubmitTaskResponse], error) {
	return nil, errTrees
}

func (internal) ReportSuccess(context.Context, *connect.Request[v1.ReportSuccessRequest]) (*connect.Response[v1.ReportSuccessResponse], error) {
	return nil, errTrees
}

func (internal) SetFailed(context.Context, *connect.Request[v1.SetFailedRequest]) (*connect.Response[v1.SetFailedResponse], error) {
	return nil, errTrees
}

func (internal) SetCancel(context.Context, *connect.Request[v1.SetCancelRequest]) (*connect.Response[v1.SetCancelResponse], error) {
	return nil, errTrees
}
