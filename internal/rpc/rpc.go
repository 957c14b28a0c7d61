// Package rpc serves the scimesh.v1 services — Queue, Worker and Internal —
// over gRPC, gRPC-Web and the Connect protocol with connect-go, on the same
// port as the REST API, with gRPC health checking and server reflection.
// Like the REST API it holds no rules of its own: it maps messages to the
// engine's operations and the domain's errors to codes, in one place.
//
// Peers is the client side of Internal: it delivers the engine's outbox
// messages to the other shards.
package rpc

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// Tokens are the bearer tokens of each role; an empty token leaves its
// service open, which the server only allows on loopback.
type Tokens struct {
	Client string // Queue
	Worker string // Worker
	Peer   string // Internal
}

// Mount registers the services, health checking and reflection on mux.
// known says which shard names exist (the topology and this shard).
func Mount(mux *http.ServeMux, e *engine.Engine, tokens Tokens, known func(string) bool, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	all := []string{tokens.Client, tokens.Worker, tokens.Peer}
	opts := func(role, token string) connect.HandlerOption {
		return connect.WithInterceptors(&auth{role: role, token: token, known: all}, errorMapper{log: log})
	}
	mux.Handle(scimeshv1connect.NewQueueHandler(&queue{e: e, known: known}, opts("client", tokens.Client)))
	mux.Handle(scimeshv1connect.NewWorkerHandler(&worker{e: e}, opts("worker", tokens.Worker)))
	mux.Handle(scimeshv1connect.NewInternalHandler(&internal{e: e}, opts("peer", tokens.Peer)))

	names := []string{scimeshv1connect.QueueName, scimeshv1connect.WorkerName, scimeshv1connect.InternalName}
	mux.Handle(grpchealth.NewHandler(&health{e: e, services: names}))
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
}

// health answers for the server (service "") and each scimesh service:
// serving while the database answers.
type health struct {
	e        *engine.Engine
	services []string
}

func (h *health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !contains(h.services, req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
	if err := h.e.Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// auth admits calls bearing the role's token: an unknown token is
// Unauthenticated, a known token of another role PermissionDenied.
type auth struct {
	role, token string
	known       []string
}

func (a *auth) check(h http.Header, procedure string) error {
	if a.token == "" {
		return nil
	}
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	switch {
	case !ok || tok == "":
		return connect.NewError(connect.CodeUnauthenticated, errors.New("missing bearer token: send the "+a.role+" token as 'Authorization: Bearer TOKEN'"))
	case equal(tok, a.token):
		return nil
	}
	for _, k := range a.known {
		if equal(tok, k) {
			return connect.NewError(connect.CodePermissionDenied, errors.New("this token may not call "+procedure+"; it needs the "+a.role+" token"))
		}
	}
	return connect.NewError(connect.CodeUnauthenticated, errors.New("unknown token: check the token you were given"))
}

func equal(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (a *auth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Header(), req.Spec().Procedure); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a *auth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *auth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader(), conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// errorMapper turns the domain's errors into codes — the one place that
// does — and keeps internals out of what clients see.
type errorMapper struct{ log *slog.Logger }

var codes = []struct {
	err  error
	code connect.Code
}{
	{domain.ErrInvalidArgument, connect.CodeInvalidArgument},
	{domain.ErrNotFound, connect.CodeNotFound},
	{domain.ErrLeaseLost, connect.CodeFailedPrecondition},
	{domain.ErrCancelled, connect.CodeFailedPrecondition},
	{domain.ErrNotReady, connect.CodeFailedPrecondition},
	{domain.ErrConflict, connect.CodeAlreadyExists},
	{domain.ErrTooLarge, connect.CodeResourceExhausted},
	{domain.ErrUnavailable, connect.CodeUnavailable}, // database busy, locked or down: retry
}

func (m errorMapper) mapErr(ctx context.Context, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			if c.code == connect.CodeUnavailable {
				m.log.WarnContext(ctx, "unavailable", "procedure", procedure, "error", err)
				return connect.NewError(c.code, errors.New("the database is not answering; retry later"))
			}
			return connect.NewError(c.code, err)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeUnavailable, errors.New("the call was cut short; retry it"))
	}
	m.log.ErrorContext(ctx, "internal error", "procedure", procedure, "error", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error; the server logged the details"))
}

func (m errorMapper) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, m.mapErr(ctx, req.Spec().Procedure, err)
	}
}

func (m errorMapper) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (m errorMapper) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return m.mapErr(ctx, conn.Spec().Procedure, next(ctx, conn))
	}
}
