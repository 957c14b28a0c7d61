package config

import (
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/spf13/pflag"
)

// DefaultWorkDir is where a worker runs commands by default.
const DefaultWorkDir = "./scimesh-work"

// AddDeadlineFlags declares a worker's deadline flags on f.
func AddDeadlineFlags(f *pflag.FlagSet) {
	f.String("max-runtime", "", "the worker's deadline as a duration from its start, such as 3h50m (env SCIMESH_MAX_RUNTIME): it claims only while at least a lease is left before it, releases its running tasks at it, and exits 0")
	f.String("until", "", "the worker's deadline as an RFC 3339 time, such as 2030-01-02T15:04:05Z (env SCIMESH_UNTIL); as --max-runtime, which it excludes")
}

// Deadline returns the worker's deadline that --max-runtime or --until
// (or their variables) give, counted from now; zero when neither is set.
// A flag wins over both variables.
func (s *Source) Deadline(now time.Time) (time.Time, error) {
	runtime, until := s.Get("SCIMESH_MAX_RUNTIME"), s.Get("SCIMESH_UNTIL")
	if s.changed("max-runtime", "until") {
		runtime, until = s.flags.Lookup("max-runtime").Value.String(), s.flags.Lookup("until").Value.String()
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

var workerIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9._:-]`)

// DefaultWorkerID is HOSTNAME-PID, made a valid worker ID.
func DefaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	id := workerIDUnsafe.ReplaceAllString(host, "_") + fmt.Sprintf("-%d", os.Getpid())
	if len(id) > 128 {
		id = id[len(id)-128:]
	}
	return id
}
