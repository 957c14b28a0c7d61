// Command scimesh-bench measures SciMesh: task lifecycles per second
// through a real server, uploads, and how long a small job waits behind a
// big one. It is a binary of its own so that the scimesh binary, which
// users run, links none of the load generators, nor the throwaway
// PostgreSQL cluster they may start (internal/bench, internal/pgcluster).
package main

import (
	"fmt"
	"log/slog"
	"os"
)

func main() {
	if err := newBenchCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "scimesh-bench:", err)
		os.Exit(1)
	}
}

// newLogger logs to standard error at level, as serve does.
func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
