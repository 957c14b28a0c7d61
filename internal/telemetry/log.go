package telemetry

import (
	"context"
	"log/slog"
)

// RequestIDKey is the attribute under which log records carry the ID of
// the request they were logged for.
const RequestIDKey = "request_id"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request ID id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request ID ctx carries, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewLogHandler returns a handler that passes records to h, adding the
// request ID of the context they were logged with (see Wrap) as
// request_id, unless the record already has one. Records logged without a
// context, or with one outside any request, pass unchanged. Within a group
// opened with WithGroup, request_id lands in that group.
func NewLogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" && !hasAttr(r, RequestIDKey) {
		r = r.Clone() // the caller's record may share its attributes
		r.AddAttrs(slog.String(RequestIDKey, id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
