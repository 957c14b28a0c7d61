package config

import (
	"log/slog"
	"os"

	"github.com/scimesh/scimesh/internal/telemetry"
)

// NewLogger is the logger of a coordinator or a worker: text lines to stderr, with the
// request ID of the context they are logged with.
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(telemetry.NewLogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}
