package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/worker/tanimoto"
)

// Workload is what a worker runs for the tasks of one workload name: an
// operator's shell command, or a function built into the binary.
type Workload struct {
	// Name is the workload name jobs ask for, as in "tanimoto".
	Name string
	// Command is run as /bin/sh -c COMMAND for each task; empty for a
	// built-in. It is the operator's string: nothing of the job goes into
	// it, the task reaches it through stdin and the environment only.
	Command string
	// Run is the built-in, used when Command is empty.
	Run RunFunc
	// Persistent runs Command once per slot instead of once per task,
	// and hands it task after task in frames (docs/workload-protocol.md).
	Persistent bool
	// Version is what the worker announces it runs for Name, which the
	// coordinator's chunk cache keys outputs by; empty for DefaultVersion.
	Version string
}

// builtinVersion is the version of the built-ins' outputs: raise it when
// what a built-in writes for some input changes.
const builtinVersion = "1"

// DefaultVersion is the version of wl when its operator gives none: for
// a built-in, "builtin:NAME:" and builtinVersion; for a command, the
// SHA-256 of the command and, when its first word names a file (a path,
// or a program on PATH), of that file's bytes too — read now, so a
// worker must be restarted to announce a file's new version.
func DefaultVersion(wl Workload) (string, error) {
	if wl.Command == "" {
		return "builtin:" + wl.Name + ":" + builtinVersion, nil
	}
	h := sha256.New()
	h.Write([]byte(wl.Command))
	if f := strings.Fields(wl.Command); len(f) > 0 {
		if path, err := exec.LookPath(f[0]); err == nil {
			file, err := os.Open(path)
			if err != nil {
				return "", fmt.Errorf("workload %s: read %s for its version: %w", wl.Name, path, err)
			}
			defer file.Close()
			h.Write([]byte{0})
			if _, err := io.Copy(h, file); err != nil {
				return "", fmt.Errorf("workload %s: read %s for its version: %w", wl.Name, path, err)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RunFunc is a workload built into the worker. It reads the task's chunk
// from in and writes its scored rows to out as CSV with a header line, as
// a command writes them to stdout; the worker keeps the best rows. It must
// return soon after ctx is done. An error that wraps ErrPermanent fails the
// task for good; any other error is a retryable failure.
type RunFunc func(ctx context.Context, t *client.Task, in io.Reader, out io.Writer) error

// ErrPermanent marks an error of a workload that running the task again
// cannot fix, such as malformed input: the worker reports it as a failure
// that is not retryable, which fails the task and its job.
var ErrPermanent = errors.New("the task cannot succeed on a retry")

// Permanent wraps err so that it matches ErrPermanent while keeping err's
// message and chain.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// builtins returns the workloads built into the binary, by name.
func builtins() map[string]RunFunc {
	return map[string]RunFunc{
		tanimoto.Name: runTanimoto,
	}
}

// runTanimoto runs the built-in tanimoto workload; its bad-input errors
// (a fingerprint of the wrong length or not in hex, naming the line) are
// permanent.
func runTanimoto(ctx context.Context, t *client.Task, in io.Reader, out io.Writer) error {
	err := tanimoto.Run(ctx, t.Parameters, t.HasHeader, in, out)
	if errors.Is(err, tanimoto.ErrBadInput) {
		return Permanent(err)
	}
	return err
}

// Builtins lists the names of the built-in workloads, sorted.
func Builtins() []string {
	var names []string
	for n := range builtins() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseWorkload reads an operator's --workload flag: "NAME=COMMAND" runs
// COMMAND with /bin/sh -c for the tasks of NAME; a bare "NAME" turns on the
// built-in of that name.
func ParseWorkload(spec string) (Workload, error) {
	name, command, hasCommand := strings.Cut(spec, "=")
	if !domain.ValidWorkload(name) {
		return Workload{}, fmt.Errorf("workload %q: the name must be 1-128 characters of A-Z a-z 0-9 . _ : - (write NAME=COMMAND, or a built-in's NAME)", spec)
	}
	if hasCommand {
		if strings.TrimSpace(command) == "" {
			return Workload{}, fmt.Errorf("workload %q has an empty command; write NAME=COMMAND, or just %s for a built-in", spec, name)
		}
		return Workload{Name: name, Command: command}, nil
	}
	run, ok := builtins()[name]
	if !ok {
		return Workload{}, fmt.Errorf("workload %q has no command and is not a built-in (built-ins: %s); write %s=COMMAND",
			spec, strings.Join(Builtins(), ", "), name)
	}
	return Workload{Name: name, Run: run}, nil
}

// ParseWorkloads reads a worker's --workload flags, of which there must be
// one at least, with the names that --persistent gives and the
// NAME=VERSION pairs of --workload-version, each of which must name one of
// them.
func ParseWorkloads(specs, persistent, versions []string) ([]Workload, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no workload: give at least one --workload NAME=COMMAND, or --workload %s for the built-in", strings.Join(Builtins(), " or "))
	}
	wls := make([]Workload, 0, len(specs))
	for _, spec := range specs {
		wl, err := ParseWorkload(spec)
		if err != nil {
			return nil, err
		}
		wl.Persistent = slices.Contains(persistent, wl.Name)
		wls = append(wls, wl)
	}
	for _, name := range persistent {
		if !slices.ContainsFunc(wls, func(wl Workload) bool { return wl.Name == name }) {
			return nil, fmt.Errorf("--persistent %s names no workload: give it with --workload %s=COMMAND too", name, name)
		}
	}
	for _, spec := range versions {
		name, v, _ := strings.Cut(spec, "=")
		if v == "" {
			return nil, fmt.Errorf("--workload-version %q gives no version: write NAME=VERSION", spec)
		}
		i := slices.IndexFunc(wls, func(wl Workload) bool { return wl.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--workload-version %s names no workload: write NAME=VERSION for a NAME given with --workload", spec)
		}
		wls[i].Version = v
	}
	return wls, nil
}
