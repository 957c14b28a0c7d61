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
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// MaxMessageBytes bounds one request message, after decompression.
const MaxMessageBytes = 16 << 20

// MaxSmallMessageBytes bounds one request message, after decompression,
// of the health check and reflection: their requests name a service or a
// symbol, and the health check needs no token, so a caller without one
// can make the coordinator read and inflate this much and no more.
const MaxSmallMessageBytes = 4 << 10

// envelope is room for a message's envelope (the calls take one message
// each; a compressed one is smaller).
const envelope = 1 << 10

// Mount registers the services, health checking and reflection on mux,
// each behind gate: Queue for the client, Worker for the worker, Internal
// for peers, health for anyone, reflection for the client. known says
// which shard names exist (the topology and this shard).
func Mount(mux *http.ServeMux, e *engine.Engine, gate *auth.Gate, known func(string) bool, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	if e != nil {
		gate.Bind(e) // accounts live in the database, shared by every replica
	}
	options := func(limit int64) connect.HandlerOption {
		return connect.WithHandlerOptions(
			connect.WithInterceptors(errorMapper{log: log}),
			connect.WithReadMaxBytes(int(limit)),
			connect.WithCompression("gzip", newBoundedGzip(limit), newGzipCompressor),
		)
	}
	opts, small := options(MaxMessageBytes), options(MaxSmallMessageBytes)
	// A stream is bounded per message by its options, not as a whole.
	handle := func(role auth.Role, limit int64, stream bool) func(string, http.Handler) {
		rt := auth.Route{Role: role, MaxBody: limit + envelope, Stream: stream}
		return func(path string, h http.Handler) { mux.Handle(path, gate.Guard(rt, Deny, slowBody(h))) }
	}
	handle(auth.Client, MaxMessageBytes, false)(scimeshv1connect.NewQueueHandler(&queue{e: e, known: known}, opts))
	handle(auth.Worker, MaxMessageBytes, false)(scimeshv1connect.NewWorkerHandler(&worker{e: e}, opts))
	handle(auth.Peer, MaxMessageBytes, false)(scimeshv1connect.NewInternalHandler(&internal{e: e}, opts))

	names := []string{scimeshv1connect.QueueName, scimeshv1connect.WorkerName, scimeshv1connect.InternalName}
	handle(auth.Anyone, MaxSmallMessageBytes, false)(grpchealth.NewHandler(&health{e: e, services: names}, small))
	// Reflection is a bidirectional stream that a caller may keep open and
	// send on for as long as it likes: it takes the client token, as the
	// services it describes do.
	reflector := grpcreflect.NewStaticReflector(names...)
	handle(auth.Client, MaxSmallMessageBytes, true)(grpcreflect.NewHandlerV1(reflector, small))
	handle(auth.Client, MaxSmallMessageBytes, true)(grpcreflect.NewHandlerV1Alpha(reflector, small))
}

// slowBody answers a request whose body trickled in and was cut off by the
// gate as the client's error, invalid_argument, in the caller's protocol:
// connect-go would otherwise take the cut for the caller's going away.
func slowBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = slowBodyReader{r.Body}
		}
		h.ServeHTTP(w, r)
	})
}

type slowBodyReader struct{ io.ReadCloser }

func (b slowBodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if slow := (*auth.SlowBodyError)(nil); errors.As(err, &slow) {
		err = connect.NewError(connect.CodeInvalidArgument, err)
	}
	return n, err
}

// errorWriter writes the gate's refusals in the caller's protocol.
var errorWriter = connect.NewErrorWriter()

// Deny writes a refusal of the gate as the RPC protocol of r says: gRPC
// status, gRPC-Web trailers or a Connect error. A 503 refusal (a
// coordinator still waiting for its database) is unavailable, with
// Retry-After as every unavailable answer has.
func Deny(w http.ResponseWriter, r *http.Request, e *auth.Error) {
	code := connect.CodeInvalidArgument
	switch e.Status {
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusRequestEntityTooLarge:
		code = connect.CodeResourceExhausted
	case http.StatusServiceUnavailable:
		_ = errorWriter.Write(w, r, retryAfter(connect.NewError(connect.CodeUnavailable, errors.New(e.Message))))
		return
	}
	_ = errorWriter.Write(w, r, connect.NewError(code, errors.New(e.Message)))
}

// Serves reports whether r calls a procedure of a service Mount
// registers (its path is /SERVICE/METHOD), so that a handler in front of
// them can answer in the RPC protocols' form rather than the REST API's.
func Serves(r *http.Request) bool {
	service, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return ok && slices.Contains(services, service)
}

// services are the services Mount registers.
var services = []string{scimeshv1connect.QueueName, scimeshv1connect.WorkerName, scimeshv1connect.InternalName,
	grpchealth.HealthV1ServiceName, grpcreflect.ReflectV1ServiceName, grpcreflect.ReflectV1AlphaServiceName}

// health answers for the server (service "") and each scimesh service:
// serving while the database answers.
type health struct {
	e        *engine.Engine
	services []string
}

func (h *health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !slices.Contains(h.services, req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
	if err := h.e.Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
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
	{domain.ErrPermissionDenied, connect.CodePermissionDenied},
	{domain.ErrTooLarge, connect.CodeResourceExhausted},
	{domain.ErrQuotaExceeded, connect.CodeResourceExhausted},
	{domain.ErrBusy, connect.CodeUnavailable},        // too many waiting calls: retry shortly
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
			switch c.err {
			case domain.ErrUnavailable:
				m.log.WarnContext(ctx, "unavailable", "procedure", procedure, "error", err)
				return retryAfter(connect.NewError(c.code, errors.New("the database is not answering; retry later")))
			case domain.ErrBusy:
				return retryAfter(connect.NewError(c.code, err))
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

// retryAfter tells the caller of an unavailable service when to try
// again, as the REST API does (a header of the Connect protocol's answer,
// trailing metadata of gRPC's).
func retryAfter(e *connect.Error) *connect.Error {
	e.Meta().Set("Retry-After", "1")
	return e
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
