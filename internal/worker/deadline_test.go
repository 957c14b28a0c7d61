package worker_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// TestReleaseDuringGrace checks that Release, called while a shutdown
// waits out a long grace period, kills the running task and releases it
// at once, and that Run then returns nil.
func TestReleaseDuringGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pids := t.TempDir()
	r := b.startWorker(worker.Config{Grace: time.Minute, Workloads: []worker.Workload{mustWorkload(t, "sleep="+sleeper(pids))}})
	j := b.job(client.JobRequest{Workload: "sleep", LeaseSeconds: 120, MaxAttempts: 1}, "id,value\na,1\n")
	sh := readPID(t, filepath.Join(pids, "0.sh"), 10*time.Second)
	child := readPID(t, filepath.Join(pids, "0.child"), 10*time.Second)
	r.cancel() // a shutdown, with a minute of grace
	r.waitLog(t, "shutting down: no more claims", 5*time.Second)
	began := time.Now()
	r.worker.Release()
	r.worker.Release() // twice is harmless
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return 15 s after Release")
	}
	t.Logf("Run returned %v after Release", time.Since(began).Round(time.Millisecond))
	waitGone(t, time.Second, sh, child)
	tk := b.tasks(j.JobID)[0]
	if tk.State != client.TaskPending || tk.Attempt != 1 || tk.MaxAttempts != 2 || !strings.Contains(tk.Error, "released the task when told to") {
		t.Fatalf("task after Release: state %s attempt %d of %d error %q; want pending again at once, released", tk.State, tk.Attempt, tk.MaxAttempts, tk.Error)
	}
}
