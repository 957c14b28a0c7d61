package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// poisonWorkload copies value into score, but fails on the chunk holding
// row r00150 while the file marker exists: a workload with a bug that the
// operator fixes (by removing the marker) before retrying the job.
func poisonWorkload(marker string) string {
	return fmt.Sprintf(`copy=cat > in.csv; if [ -f %q ] && grep -q '^r00150,' in.csv; then echo "poisoned chunk" >&2; exit 3; fi; sed 1s/value/score/ in.csv`, marker)
}

// TestRetryPoisonedJobEndToEnd fails a job on a poisoned chunk with a real
// coordinator and worker, fixes the workload, and runs `scimesh retry`:
// only the chunks that had not completed run again (each claimed once
// more), and the result is byte for byte a clean run's.
func TestRetryPoisonedJobEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "db", "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
	marker := filepath.Join(dir, "poison")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w0", "--concurrency", "1",
		"--work-dir", filepath.Join(dir, "work"), "--workload", poisonWorkload(marker))
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 1000, 25)
	if msg, err := run(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "25",
		"--chunk-rows", "100", "--max-attempts", "2"); err != nil {
		t.Fatalf("submit: %v\n%s", err, msg)
	}
	var list struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	if s := call(t, "GET", p.URL+"/jobs?limit=1", "ctok", nil, &list); s != 200 || len(list.Jobs) != 1 {
		t.Fatalf("GET /jobs = %d %+v", s, list)
	}
	id := list.Jobs[0].JobID
	waitStatus := func(want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var j jobOut
			call(t, "GET", p.URL+"/jobs/"+id, "ctok", nil, &j)
			if j.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s is %s after 60 s, want %s", id, j.Status, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	type chunk struct {
		TaskID     string `json:"task_id"`
		ChunkIndex int    `json:"chunk_index"`
		Attempt    int    `json:"attempt"`
		State      string `json:"state"`
	}
	tasks := func() []chunk {
		t.Helper()
		var out struct {
			Tasks []chunk `json:"tasks"`
		}
		if s := call(t, "GET", p.URL+"/jobs/"+id+"/tasks?limit=100", "ctok", nil, &out); s != 200 || len(out.Tasks) != 10 {
			t.Fatalf("GET tasks = %d, %d tasks", s, len(out.Tasks))
		}
		return out.Tasks
	}
	waitStatus("failed")
	before := tasks()
	if c := before[1]; c.State != "failed" || c.Attempt != 2 {
		t.Fatalf("poisoned chunk before the retry: %+v, want failed after 2 attempts", c)
	}
	completed := 0
	for _, c := range before {
		if c.State == "completed" {
			completed++
		}
	}
	if completed == 0 {
		t.Fatalf("no chunk completed before the job failed: %+v", before)
	}
	res, err := run(t, dir, clientEnv(p.URL), "result", id)
	if err == nil {
		t.Fatalf("result of a failed job succeeded:\n%s", res)
	}

	// Fix the workload, then retry the failed job.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	msg, err := run(t, dir, clientEnv(p.URL), "retry", id)
	if err != nil || !strings.Contains(msg, "pending") || !strings.Contains(msg, fmt.Sprintf("%d of 10 chunks", 10-completed)) {
		t.Fatalf("retry: %v\n%s", err, msg)
	}
	waitStatus("completed")
	for i, c := range tasks() {
		b := before[i]
		wantAttempt := b.Attempt + 1 // claimed once more
		if b.State == "completed" {
			wantAttempt = b.Attempt // kept, not run again
		}
		if c.State != "completed" || c.Attempt != wantAttempt {
			t.Errorf("chunk %d: %s at attempt %d after the retry (was %s at %d), want completed at %d",
				i, c.State, c.Attempt, b.State, b.Attempt, wantAttempt)
		}
	}
	got, err := runStdout(t, dir, clientEnv(p.URL), "result", id)
	if err != nil || got != want {
		t.Fatalf("result after the retry (%v):\n%s\nwant (a clean run):\n%s", err, got, want)
	}
	msg, err = run(t, dir, clientEnv(p.URL), "retry", id)
	if err == nil || !strings.Contains(msg, "completed") {
		t.Fatalf("retry of a completed job: %v\n%s", err, msg)
	}
}
