package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestSubmit: a table submitted is uploaded and a job made over it; the
// job's result saved to a writer and to a file is its final CSV; Err
// says why a job did not complete.
func TestSubmit(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	up, job, err := c.user.Submit(ctx, strings.NewReader("id,x\na,1\nb,2\n"), &client.JobRequest{Workload: "w", TopK: 1})
	if err != nil || up.Rows != 3 || job.Tasks.Total != 1 {
		t.Fatalf("Submit: %+v, %+v, %v; want an upload of 3 lines and a job of 1 chunk", up, job, err)
	}
	if err := job.Err(); err == nil || !strings.Contains(err.Error(), "job "+job.JobID+" is pending") {
		t.Fatalf("Err of a pending job: %v", err)
	}
	tk, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1", Workloads: []string{"w"}, WaitSeconds: 1})
	if err != nil || tk == nil {
		t.Fatalf("claim: %+v, %v", tk, err)
	}
	if _, err := c.worker.Complete(ctx, tk.TaskID, client.Result{WorkerID: "w1", Attempt: 1, Output: "id,score\nb,2\n"}); err != nil {
		t.Fatal(err)
	}
	done, err := c.user.Follow(ctx, job.JobID, func(*client.Job) {}, func(error) {})
	if err != nil || done.Err() != nil {
		t.Fatalf("Follow: %+v, %v, Err %v", done, err, done.Err())
	}
	var b strings.Builder
	if err := c.user.SaveResult(ctx, job.JobID, &b); err != nil || b.String() != "id,score\nb,2\n" {
		t.Fatalf("SaveResult: %q, %v", b.String(), err)
	}
	path := filepath.Join(t.TempDir(), "best.csv")
	if err := c.user.SaveResultFile(ctx, job.JobID, path); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "id,score\nb,2\n" {
		t.Fatalf("SaveResultFile wrote %q, %v", got, err)
	}
	// A job that does not exist saves nothing, and makes no file.
	missing := filepath.Join(t.TempDir(), "none.csv")
	err = c.user.SaveResultFile(ctx, "s0:nosuchjob", missing)
	wantCode(t, err, 404, client.CodeNotFound)
	if _, statErr := os.Stat(missing); statErr == nil {
		t.Fatal("SaveResultFile of a missing job made its file")
	}
	// A table the coordinator refuses uploads nothing and makes no job.
	up, job, err = c.user.Submit(ctx, strings.NewReader(""), &client.JobRequest{Workload: "w"})
	if err == nil || up != nil || job != nil {
		t.Fatalf("Submit of an empty table: %+v, %+v, %v; want refused", up, job, err)
	}
	failed := &client.Job{JobID: "s0:j", Status: client.JobFailed, Error: "task s0:t failed"}
	if err := failed.Err(); err == nil || err.Error() != "job s0:j is failed: task s0:t failed" {
		t.Fatalf("Err of a failed job: %v", err)
	}
}
