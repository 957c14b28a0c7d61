package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// TestFollow: Follow reports the job as its chunks complete and returns
// it once final; it stops at once on an error it cannot ride out, and
// when its context ends.
func TestFollow(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx := t.Context()
	j, err := c.user.CreateJob(ctx, &client.JobRequest{Workload: "w", TopK: 1, Input: client.JobInput{Chunks: chunks(2)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	type followed struct {
		job *client.Job
		err error
	}
	var (
		mu   sync.Mutex
		seen []float64
	)
	done := make(chan followed, 1)
	go func() {
		job, err := c.user.Follow(ctx, j.JobID, func(j *client.Job) {
			mu.Lock()
			seen = append(seen, j.Progress)
			mu.Unlock()
		}, func(err error) { t.Errorf("retrying a coordinator that answers: %v", err) })
		done <- followed{job, err}
	}()
	for i := range 2 {
		tk, err := c.worker.Claim(ctx, client.ClaimRequest{WorkerID: "w1", Workloads: []string{"w"}, WaitSeconds: 1})
		if err != nil || tk == nil {
			t.Fatalf("claim: %+v, %v", tk, err)
		}
		if _, err := c.worker.Complete(ctx, tk.TaskID, client.Result{WorkerID: "w1", Attempt: 1, Output: "id,score\nr" + string(rune('a'+i)) + ",1\n"}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case f := <-done:
		if f.err != nil || f.job.Status != client.JobCompleted {
			t.Fatalf("Follow: %+v, %v; want the completed job", f.job, f.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Follow still waits 20s after the job's last chunk completed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != 1 {
		t.Fatalf("progress seen %v, want it to end at 1", seen)
	}

	_, err = c.user.Follow(ctx, "s0:nosuchjob", func(*client.Job) {}, func(error) {})
	wantCode(t, err, 404, client.CodeNotFound)

	// A coordinator that cannot be reached is ridden out until the
	// context ends.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := client.New("http://"+ln.Addr().String(), "ctok")
	ln.Close()
	stop, cancel := context.WithCancel(ctx)
	retries := 0
	_, err = gone.Follow(stop, j.JobID, func(*client.Job) { t.Error("a job seen from a coordinator that is gone") }, func(error) {
		if retries++; retries == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || retries != 2 {
		t.Fatalf("Follow of a coordinator that is gone: %v after %d retries, want context.Canceled after 2", err, retries)
	}
}
