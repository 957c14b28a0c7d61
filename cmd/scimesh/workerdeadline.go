package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/scimesh/scimesh/internal/worker"
)

// releaseSignal makes a worker release its running tasks at once and exit
// 0: the warning that its allocation ends (Slurm's --signal, a spot
// instance's notice turned into a kill -USR1).
const releaseSignal = syscall.SIGUSR1

// addDeadlineFlags declares a worker's deadline flags on f.
func addDeadlineFlags(f *pflag.FlagSet) {
	f.String("max-runtime", "", "the worker's deadline as a duration from its start, such as 3h50m (env SCIMESH_MAX_RUNTIME): it claims only while at least a lease is left before it, releases its running tasks at it, and exits 0")
	f.String("until", "", "the worker's deadline as an RFC 3339 time, such as 2030-01-02T15:04:05Z (env SCIMESH_UNTIL); as --max-runtime, which it excludes")
}

// resolveDeadline returns the deadline --max-runtime or --until (or their
// variables) give, counted from now; zero when neither is set. A flag wins
// over both variables.
func resolveDeadline(cmd *cobra.Command, e *env, now time.Time) (time.Time, error) {
	f := cmd.Flags()
	runtime, until := e.get("SCIMESH_MAX_RUNTIME"), e.get("SCIMESH_UNTIL")
	if f.Changed("max-runtime") || f.Changed("until") {
		runtime, until = f.Lookup("max-runtime").Value.String(), f.Lookup("until").Value.String()
	}
	switch {
	case runtime != "" && until != "":
		return time.Time{}, fmt.Errorf("give --max-runtime or --until, not both (or SCIMESH_MAX_RUNTIME or SCIMESH_UNTIL)")
	case runtime != "":
		d, err := time.ParseDuration(runtime)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("--max-runtime %q: give a positive duration such as 90m or 3h50m", runtime)
		}
		return now.Add(d), nil
	case until != "":
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return time.Time{}, fmt.Errorf("--until %q: give an RFC 3339 time such as 2030-01-02T15:04:05Z: %w", until, err)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// releaseOnSignal calls w.Release when the process gets releaseSignal,
// until the returned function is called.
func releaseOnSignal(w *worker.Worker) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, releaseSignal)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
			w.Release()
		case <-done:
		}
	})
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}
