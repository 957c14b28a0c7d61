package inprocess

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

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
	up, err := r.c.Upload(ctx, f)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", path, err)
	}
	job, err := r.c.CreateJob(ctx, &client.JobRequest{
		Name: filepath.Base(path), Workload: spec.Workload, Parameters: params, Input: client.JobInput{UploadID: up.UploadID},
		TopK: spec.TopK, ChunkRows: spec.ChunkRows, MaxAttempts: spec.MaxAttempts,
	}, "")
	if err != nil {
		return "", fmt.Errorf("create the job: %w", err)
	}
	return job.JobID, nil
}

// Status gets the job.
func (r *rest) Status(ctx context.Context, jobID string) (*client.Job, error) {
	return r.c.GetJob(ctx, jobID)
}

// Wait long-polls the job until it is final.
func (r *rest) Wait(ctx context.Context, jobID string) (*client.Job, error) {
	after := ""
	for {
		job, err := r.c.WaitJob(ctx, jobID, after, 10*time.Second)
		if err != nil {
			return nil, err
		}
		if job.Final() {
			return job, nil
		}
		if job.ProgressToken == after {
			time.Sleep(100 * time.Millisecond) // nothing new, at once
		}
		after = job.ProgressToken
	}
}

// Result downloads the final CSV.
func (r *rest) Result(ctx context.Context, jobID string) ([]byte, error) {
	rc, err := r.c.Result(ctx, jobID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
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
