package inprocess

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/tests/framework"
)

// TestMain fails the package's tests if any goroutine a Runner started
// outlives the cleanups of its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunner runs a job through a worker, restarts the coordinator and
// reads the job back; its goroutines must all be gone after the cleanups.
func TestRunner(t *testing.T) {
	r := Runner{}
	co := r.Serve(t, framework.ServeConfig{})
	r.Worker(t, co.URL(), framework.WorkerConfig{Workloads: []string{"copy=sed 1s/value/score/"}, Concurrency: 2})
	table := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(table, []byte("id,value\na,1\nb,3\nc,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := co.Client()
	id, err := c.Submit(t.Context(), table, framework.JobSpec{Workload: "copy", TopK: 2, ChunkRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c.Wait(t.Context(), id); err != nil || j.Status != client.JobCompleted {
		t.Fatalf("wait: %+v, %v", j, err)
	}
	co.Restart(t)
	got, err := c.Result(t.Context(), id)
	if want := "id,score\nb,3\nc,2\n"; err != nil || string(got) != want {
		t.Fatalf("result after the restart: %q, %v; want %q", got, err, want)
	}
}
