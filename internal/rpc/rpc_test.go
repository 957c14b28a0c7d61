package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	m := errorMapper{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	busy := fmt.Errorf("%w: %w: database is locked (5) at /var/lib/x.db", domain.ErrUnavailable, store.ErrUnavailable)
	tests := []struct {
		err      error
		code     connect.Code
		leaks    string // must not appear in the message
		mentions string // must appear
	}{
		{domain.Invalidf("top_k is 0"), connect.CodeInvalidArgument, "", "top_k"},
		{fmt.Errorf("task x: %w", domain.ErrNotFound), connect.CodeNotFound, "", "task x"},
		{fmt.Errorf("held by w2: %w", domain.ErrLeaseLost), connect.CodeFailedPrecondition, "", "w2"},
		{domain.ErrCancelled, connect.CodeFailedPrecondition, "", "cancelled"},
		{domain.ErrConflict, connect.CodeAlreadyExists, "", "conflict"},
		{domain.ErrTooLarge, connect.CodeResourceExhausted, "", ""},
		{fmt.Errorf("quota max_jobs: 3 unfinished jobs of 3 allowed: %w", domain.ErrQuotaExceeded), connect.CodeResourceExhausted, "", "max_jobs"},
		{fmt.Errorf("only an admin: %w", domain.ErrPermissionDenied), connect.CodePermissionDenied, "", "admin"},
		{busy, connect.CodeUnavailable, "/var/lib", "retry"},
		{context.DeadlineExceeded, connect.CodeUnavailable, "", "retry"},
		{errors.New("pq: relation tasks at 0xdeadbeef"), connect.CodeInternal, "0xdeadbeef", "internal"},
		{connect.NewError(connect.CodeUnimplemented, errors.New("later")), connect.CodeUnimplemented, "", "later"},
	}
	for _, tt := range tests {
		got := m.mapErr(context.Background(), "/scimesh.v1.Queue/Query", tt.err)
		var ce *connect.Error
		if !errors.As(got, &ce) || ce.Code() != tt.code {
			t.Errorf("%v → %v, want code %v", tt.err, got, tt.code)
			continue
		}
		if tt.leaks != "" && strings.Contains(ce.Message(), tt.leaks) {
			t.Errorf("%v → message %q leaks %q", tt.err, ce.Message(), tt.leaks)
		}
		if !strings.Contains(ce.Message(), tt.mentions) {
			t.Errorf("%v → message %q does not mention %q", tt.err, ce.Message(), tt.mentions)
		}
	}
	if m.mapErr(context.Background(), "p", nil) != nil {
		t.Error("nil error mapped to an error")
	}
}
