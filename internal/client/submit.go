package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// Submit uploads the CSV table r reads and creates the job req describes
// over it (req.Input is set to the upload). The job is created under an
// idempotency key of its own, so that a creation the client sends again
// after a lost answer makes one job. It returns the upload, and the job
// unless the creation failed: an error with no upload is the upload's.
func (c *Client) Submit(ctx context.Context, r io.Reader, req *JobRequest) (*Upload, *Job, error) {
	up, err := c.Upload(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	req.Input = JobInput{UploadID: up.UploadID}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	job, err := c.CreateJob(ctx, req, "scimesh-cli-"+hex.EncodeToString(key))
	if err != nil {
		return up, nil, err
	}
	return up, job, nil
}

// Err is nil for a job that completed, and otherwise an error that names
// its status and, when it has one, its error.
func (j *Job) Err() error {
	if j.Status == JobCompleted {
		return nil
	}
	msg := fmt.Sprintf("job %s is %s", j.JobID, j.Status)
	if j.Error != "" {
		msg += ": " + j.Error
	}
	return errors.New(msg)
}

// SaveResult writes the final CSV of job id to w.
func (c *Client) SaveResult(ctx context.Context, id string, w io.Writer) error {
	rc, err := c.Result(ctx, id)
	if err != nil {
		return fmt.Errorf("download the result of job %s: %w", id, err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("download the result of job %s: %w", id, err)
	}
	return nil
}

// SaveResultFile writes the final CSV of job id to the file at path; a
// download that breaks off leaves it incomplete, and says so.
func (c *Client) SaveResultFile(ctx context.Context, id, path string) error {
	rc, err := c.Result(ctx, id)
	if err != nil {
		return fmt.Errorf("download the result of job %s: %w", id, err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write the result: %w", err)
	}
	_, err = io.Copy(f, rc)
	// A write the file system defers may fail only at Close.
	if cerr := f.Close(); err == nil && cerr != nil {
		return fmt.Errorf("write the result to %s: %w", path, cerr)
	}
	if err != nil {
		return fmt.Errorf("download the result of job %s: %w; %s is incomplete", id, err, path)
	}
	return nil
}
