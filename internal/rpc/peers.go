package rpc

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/topology"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// Peers delivers the engine's outbox messages to the Internal service of
// other shards, over the Connect protocol, with the peer token. It never
// sends the token over plain HTTP to a host that is not loopback unless
// Insecure is set: such a delivery is refused (engine.ErrRefused).
type Peers struct {
	// Insecure allows sending the peer token over plain http:// to any
	// host (--insecure-peers), for networks the operator trusts. Set it
	// before the first delivery.
	Insecure bool

	url   func(shard string) (string, bool)
	token string
	http  *http.Client

	mu      sync.Mutex
	clients map[string]scimeshv1connect.InternalClient
}

// NewPeers returns Peers that find a shard's coordinator with url (the
// topology's URL) and call it with client, sending token.
func NewPeers(url func(shard string) (string, bool), token string, client *http.Client) *Peers {
	return &Peers{url: url, token: token, http: client, clients: map[string]scimeshv1connect.InternalClient{}}
}

// client returns the client of shard's coordinator and its base URL.
func (p *Peers) client(shard string) (scimeshv1connect.InternalClient, string, error) {
	base, ok := p.url(shard)
	if !ok {
		return nil, "", fmt.Errorf("%w: shard %s is not in this coordinator's topology; add it to --topology", engine.ErrUnreachable, shard)
	}
	if p.token != "" && !p.Insecure && topology.PlainRemote(base) {
		return nil, base, fmt.Errorf("%w: not sending PEER_AUTH_TOKEN to shard %s over plain HTTP (%s), where anyone on the way could read it: "+
			"give the shard an https:// URL in --topology, or pass --insecure-peers (SCIMESH_INSECURE_PEERS) on a network you trust",
			engine.ErrRefused, shard, base)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[shard]; ok {
		return c, base, nil
	}
	c := scimeshv1connect.NewInternalClient(p.http, base, connect.WithInterceptors(Bearer(p.token)))
	p.clients[shard] = c
	return c, base, nil
}

// Deliver makes the Internal call that applies m on shard. A call the
// receiver refuses for good — the message is malformed or contradicts
// what the receiver has — wraps engine.ErrRefused; one that got no answer
// (the shard is down, slow or cut off) wraps engine.ErrUnreachable.
func (p *Peers) Deliver(ctx context.Context, shard string, m *engine.Message) error {
	c, base, err := p.client(shard)
	if err != nil {
		return err
	}
	switch m.Kind {
	case engine.MsgSubmitTask:
		req := &v1.SubmitTaskRequest{}
		for _, t := range m.Tasks {
			pt, err := placedTaskProto(t)
			if err != nil {
				return fmt.Errorf("%w: %w", engine.ErrRefused, err)
			}
			req.Tasks = append(req.Tasks, pt)
		}
		_, err = c.SubmitTask(ctx, connect.NewRequest(req))
	case engine.MsgReportSuccess:
		v, verr := jsonValue(m.Result)
		if verr != nil {
			return fmt.Errorf("%w: result of task %s: %w", engine.ErrRefused, m.UpstreamID, verr)
		}
		_, err = c.ReportSuccess(ctx, connect.NewRequest(&v1.ReportSuccessRequest{TaskId: m.TaskID, UpstreamId: m.UpstreamID, Result: v}))
	case engine.MsgSetFailed:
		_, err = c.SetFailed(ctx, connect.NewRequest(&v1.SetFailedRequest{TaskId: m.TaskID, UpstreamId: m.UpstreamID, Error: m.Error}))
	case engine.MsgSetCancel:
		_, err = c.SetCancel(ctx, connect.NewRequest(&v1.SetCancelRequest{TaskId: m.TaskID, Reason: m.Error}))
	default:
		return fmt.Errorf("%w: unknown message kind %q", engine.ErrRefused, m.Kind)
	}
	if err == nil {
		return nil
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists:
		return fmt.Errorf("%w: %w", engine.ErrRefused, err)
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeCanceled, connect.CodeUnknown:
		return fmt.Errorf("%w: %s: %w", engine.ErrUnreachable, base, err)
	case connect.CodeNotFound:
		return fmt.Errorf("%w: %w", engine.ErrNoTask, err)
	}
	return err
}

// placedTaskProto is a task to create on another shard as its message.
func placedTaskProto(t engine.PlacedTask) (*v1.PlacedTask, error) {
	args, err := protoArgs(t.Args)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return &v1.PlacedTask{
		TaskId: t.ID, RootId: t.TreeID, DownstreamId: t.DownstreamID, Workload: t.Workload, Args: args,
		MaxAttempts: int32(t.MaxAttempts), LeaseSeconds: int32(t.LeaseSeconds), Priority: int32(t.Priority),
		TreeCreatedAt: timestamppb.New(t.TreeCreatedAt), Position: int32(t.Position), Owner: t.Owner,
	}, nil
}

// H2CClient is an HTTP client that speaks HTTP/2 without TLS, as gRPC
// clients of a coordinator without TLS do: one connection, its streams
// shared by every call.
func H2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// Bearer is a client interceptor that sends a bearer token with every
// call; an empty token sends none.
type Bearer string

// WrapUnary adds the token to a unary call.
func (b Bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b != "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient adds the token to a streaming call.
func (b Bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if b != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		}
		return conn
	}
}

// WrapStreamingHandler leaves handlers alone: Bearer is for clients.
func (b Bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
