package slurm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// incomplete is an Array, before Complete, that Complete accepts, with the flags given that say so.
func incomplete() (*Array, func(string) bool) {
	a := &Array{Coordinator: "http://coord:8080", Workloads: []string{"tanimoto"}, Jobs: 4, TimeText: "01:00:00", Binary: "/opt/scimesh"}
	return a, func(flag string) bool { return flag == "time" }
}

func TestComplete(t *testing.T) {
	t.Parallel()
	a, given := incomplete()
	a.CPUsPerTask, a.TimeText = 8, "00:10:00"
	if err := a.Complete(given); err != nil {
		t.Fatal(err)
	}
	if a.Walltime != 10*time.Minute || a.ReleaseBefore != time.Minute || a.Concurrency != 8 || a.Binary != "/opt/scimesh" {
		t.Fatalf("completed %+v; want 10m, a margin of a tenth of it and the concurrency of the CPUs", a)
	}
	// The margin is at least 10s and at most 2m.
	for text, want := range map[string]time.Duration{"00:01:00": 10 * time.Second, "10:00:00": 2 * time.Minute} {
		a, given := incomplete()
		a.TimeText = text
		if err := a.Complete(given); err != nil || a.ReleaseBefore != want || a.Concurrency != 1 {
			t.Errorf("walltime %s: margin %v, concurrency %d, %v; want %v and 1", text, a.ReleaseBefore, a.Concurrency, err, want)
		}
	}
	// A relative binary and token file are made absolute.
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, given = incomplete()
	a.Binary, a.TokenFile = "bin/scimesh", token
	if err := a.Complete(given); err != nil || !filepath.IsAbs(a.Binary) || a.TokenFile != token {
		t.Errorf("relative binary: %q, token file %q, %v", a.Binary, a.TokenFile, err)
	}
}

func TestCompleteRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		bad   func(a *Array)
		given []string
		want  string
	}{
		{"no coordinator", func(a *Array) { a.Coordinator = "" }, nil, "no coordinator"},
		{"a coordinator that is no URL", func(a *Array) { a.Coordinator = "coord:8080" }, nil, "give an http:// or https:// URL"},
		{"no workload", func(a *Array) { a.Workloads = nil }, nil, "no workload"},
		{"no jobs", func(a *Array) { a.Jobs = 0 }, nil, "--jobs 0"},
		{"no walltime", func(*Array) {}, []string{"none"}, "no walltime"},
		{"a walltime that is none", func(a *Array) { a.TimeText = "an hour" }, nil, "an hour"},
		{"a margin that leaves no time", func(a *Array) { a.ReleaseBefore = time.Hour }, nil, "--release-before 1h0m0s"},
		{"no CPUs given", func(a *Array) { a.CPUsPerTask = 0 }, []string{"time", "cpus-per-task"}, "--cpus-per-task 0"},
		{"no concurrency given", func(a *Array) { a.Concurrency = -1 }, []string{"time", "concurrency"}, "--concurrency -1"},
		{"a token file others may read", func(a *Array) { a.TokenFile = "/etc/passwd" }, nil, "/etc/passwd"},
		{"a line break", func(a *Array) { a.Partition = "short\n#SBATCH --x" }, nil, "control character"},
	} {
		a, given := incomplete()
		c.bad(a)
		if c.given != nil {
			given = func(flag string) bool { return slices.Contains(c.given, flag) }
		}
		if err := a.Complete(given); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
