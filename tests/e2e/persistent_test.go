package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/testenv"
)

// TestWorkerPersistentFlag runs `scimesh worker --persistent` on a
// workload that speaks the frames protocol: the job's result is exact and
// the command started once for the worker's one slot. A --persistent name
// that no --workload gives is refused.
func TestWorkerPersistentFlag(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "no python3 on PATH for the persistent workload's script")
	}
	script, err := filepath.Abs("../../internal/worker/testdata/frames.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := run(t, dir, workerEnv("http://127.0.0.1:1"), "worker", "--workload", "a=cat", "--persistent", "b")
	if err == nil || !strings.Contains(out, "--persistent b names no workload") {
		t.Fatalf("worker with a --persistent name of no workload: %v\n%s", err, out)
	}
	p := serveSQLite(t, dir)
	starts := filepath.Join(dir, "starts")
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w", "--work-dir", filepath.Join(dir, "work"),
		"--workload", fmt.Sprintf("copy=%s %s %s 0.5", py, script, starts), "--persistent", "copy")
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 2000, 10)
	res := filepath.Join(dir, "result.csv")
	msg, err := run(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "10", "--chunk-rows", "100", "--wait", "--output", res)
	if err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, msg)
	}
	if got, _ := os.ReadFile(res); string(got) != want {
		t.Fatalf("result:\n%s\nwant:\n%s", got, want)
	}
	data, _ := os.ReadFile(starts)
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Fatalf("the persistent command started %d times for 20 chunks on one slot, want once:\n%s", n, data)
	}
}
