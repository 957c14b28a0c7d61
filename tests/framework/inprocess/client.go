package inprocess

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/tests/framework"
)

// rest is the framework's Client as internal/client.
type rest struct {
	c *client.Client
}

var _ framework.Client = (*rest)(nil)

// Submit uploads the table and creates the job, as scimesh submit does.
func (r *rest) Submit(ctx context.Context, path string, spec framework.JobSpec) (string, error) {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(spec.Params)) {
		pairs = append(pairs, k+"="+spec.Params[k])
	}
	params, err := domain.ParseParameterPairs(pairs)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	up, job, err := r.c.Submit(ctx, f, &client.JobRequest{
		Name: filepath.Base(path), Workload: spec.Workload, Parameters: params,
		TopK: spec.TopK, ChunkRows: spec.ChunkRows, MaxAttempts: spec.MaxAttempts, LeaseSeconds: spec.LeaseSeconds,
	})
	if up == nil {
		return "", fmt.Errorf("upload %s: %w", path, err)
	}
	if err != nil {
		return "", fmt.Errorf("create the job: %w", err)
	}
	return job.JobID, nil
}

// Status gets the job.
func (r *rest) Status(ctx context.Context, jobID string) (*client.Job, error) {
	return r.c.GetJob(ctx, jobID)
}

// Wait follows the job until it is final, as scimesh wait does.
func (r *rest) Wait(ctx context.Context, jobID string) (*client.Job, error) {
	return r.c.Follow(ctx, jobID, func(*client.Job) {}, func(error) {})
}

// Result downloads the final CSV.
func (r *rest) Result(ctx context.Context, jobID string) ([]byte, error) {
	var b bytes.Buffer
	if err := r.c.SaveResult(ctx, jobID, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Cancel cancels the job.
func (r *rest) Cancel(ctx context.Context, jobID string) error {
	_, err := r.c.Cancel(ctx, jobID)
	return err
}

// Retry retries the job.
func (r *rest) Retry(ctx context.Context, jobID string) error {
	_, err := r.c.Retry(ctx, jobID)
	return err
}

// Jobs lists the first page of jobs.
func (r *rest) Jobs(ctx context.Context) ([]client.Job, error) {
	list, err := r.c.ListJobs(ctx, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Jobs, nil
}
