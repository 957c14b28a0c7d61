package binary

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/tests/framework"
)

// cli is the framework's Client as the client commands of the binary at
// path, run in dir with env.
type cli struct {
	path, dir string
	env       []string
}

var _ framework.Client = (*cli)(nil)

// run runs `scimesh args…` and returns its standard output; an error
// carries its standard error, which says what the user is told.
func (c *cli) run(ctx context.Context, args ...string) (string, error) {
	out, err := Output(ctx, c.path, c.dir, c.env, args...)
	if err != nil {
		return out, fmt.Errorf("scimesh %s: %w", args[0], err)
	}
	return out, nil
}

// Submit runs `scimesh submit`.
func (c *cli) Submit(ctx context.Context, path string, spec framework.JobSpec) (string, error) {
	args := []string{"submit", path, "--workload", spec.Workload}
	for _, f := range []struct {
		flag string
		n    int
	}{{"--top-k", spec.TopK}, {"--chunk-rows", spec.ChunkRows}, {"--max-attempts", spec.MaxAttempts}, {"--lease-seconds", spec.LeaseSeconds}} {
		if f.n != 0 {
			args = append(args, f.flag, strconv.Itoa(f.n))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Params)) {
		args = append(args, "--param", k+"="+spec.Params[k])
	}
	out, err := c.run(ctx, args...)
	return strings.TrimSpace(out), err
}

// Status runs `scimesh status --json`.
func (c *cli) Status(ctx context.Context, jobID string) (*client.Job, error) {
	out, err := c.run(ctx, "status", jobID, "--json")
	if err != nil {
		return nil, err
	}
	var j client.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		return nil, fmt.Errorf("scimesh status --json printed %q: %w", out, err)
	}
	return &j, nil
}

// Wait runs `scimesh wait`, which fails for a job that ends failed or
// cancelled, then returns the job's status.
func (c *cli) Wait(ctx context.Context, jobID string) (*client.Job, error) {
	_, waitErr := c.run(ctx, "wait", jobID, "--output", os.DevNull)
	j, err := c.Status(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if !j.Final() {
		return nil, fmt.Errorf("job %s is %s after scimesh wait: %v", jobID, j.Status, waitErr)
	}
	if (j.Status == client.JobCompleted) != (waitErr == nil) {
		return nil, fmt.Errorf("scimesh wait for a job that ended %s: %v", j.Status, waitErr)
	}
	return j, nil
}

// Result runs `scimesh result`.
func (c *cli) Result(ctx context.Context, jobID string) ([]byte, error) {
	out, err := c.run(ctx, "result", jobID)
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// Cancel runs `scimesh cancel`.
func (c *cli) Cancel(ctx context.Context, jobID string) error {
	_, err := c.run(ctx, "cancel", jobID)
	return err
}

// Retry runs `scimesh retry`.
func (c *cli) Retry(ctx context.Context, jobID string) error {
	_, err := c.run(ctx, "retry", jobID)
	return err
}

// Jobs runs `scimesh jobs --json`.
func (c *cli) Jobs(ctx context.Context) ([]client.Job, error) {
	out, err := c.run(ctx, "jobs", "--json")
	if err != nil {
		return nil, err
	}
	var list client.JobList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("scimesh jobs --json printed %q: %w", out, err)
	}
	return list.Jobs, nil
}
