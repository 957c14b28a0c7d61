package e2e

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/slurm"
	"github.com/scimesh/scimesh/internal/testenv"
)

// writeScoredTable writes n rows id,value with values that tie often, and
// returns the brute-force top k by value, desc, ties by row order, as the
// final CSV must read (the workload copies value into score).
func writeScoredTable(t *testing.T, path string, n, k int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	var b strings.Builder
	b.WriteString("id,value\n")
	type row struct {
		id    string
		value int
	}
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{fmt.Sprintf("r%05d", i), rng.IntN(1000)}
		fmt.Fprintf(&b, "%s,%d\n", rows[i].id, rows[i].value)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(rows, func(a, b row) int { return b.value - a.value })
	var want bytes.Buffer
	w := csv.NewWriter(&want)
	w.Write([]string{"id", "score"})
	for _, r := range rows[:k] {
		w.Write([]string{r.id, strconv.Itoa(r.value)})
	}
	w.Flush()
	return want.String()
}

// copyWorkload turns id,value into id,score; slow makes it sleep first.
func copyWorkload(slow string) string {
	return "copy=" + slow + "sed 1s/value/score/"
}

func clientEnv(url string) []string {
	return []string{"SCIMESH_COORDINATOR=" + url, "SCIMESH_TOKEN=ctok"}
}

func workerEnv(url string) []string {
	return []string{"SCIMESH_COORDINATOR=" + url, "SCIMESH_TOKEN=wtok"}
}

// TestSubmitWaitEndToEnd runs the product as a user does: a coordinator and
// two workers as real processes, `scimesh submit --wait`, and the final CSV
// compared byte for byte with a brute-force computation. Then the other
// client commands on the finished job.
func TestSubmitWaitEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveProc(t, dir, tokenEnv, "--db", "sqlite:"+filepath.Join(dir, "db", "scimesh.db"), "--data-dir", filepath.Join(dir, "data"))
	for i := range 2 {
		start(t, dir, workerEnv(p.URL), "worker", "--id", fmt.Sprintf("w%d", i), "--concurrency", "2",
			"--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))
	}
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 5000, 25)
	out := filepath.Join(dir, "result.csv")
	msg, err := run(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "25",
		"--chunk-rows", "300", "--wait", "--output", out, "--param", "note=hello", "--param", "n:=3")
	if err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("result differs from brute force:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(msg, "100%") || !strings.Contains(msg, "17/17 chunks") {
		t.Errorf("submit --wait showed no finished progress bar:\n%s", msg)
	}

	// The other commands, on that job.
	jobs, err := run(t, dir, clientEnv(p.URL), "jobs", "--status", "completed")
	if err != nil || !strings.Contains(jobs, "completed") || !strings.Contains(jobs, "copy") {
		t.Fatalf("jobs: %v\n%s", err, jobs)
	}
	id := strings.Fields(strings.Split(jobs, "\n")[1])[0]
	status, err := run(t, dir, clientEnv(p.URL), "status", id)
	if err != nil || !strings.Contains(status, "completed") || !strings.Contains(status, "17 of 17 chunks") {
		t.Fatalf("status: %v\n%s", err, status)
	}
	res, err := runStdout(t, dir, clientEnv(p.URL), "result", id)
	if err != nil || res != want {
		t.Fatalf("result: %v\n%s", err, res)
	}
	logs, err := run(t, dir, clientEnv(p.URL), "logs", id+"-0")
	if err != nil {
		t.Fatalf("logs: %v\n%s", err, logs)
	}
	cancel, err := run(t, dir, clientEnv(p.URL), "cancel", id)
	if err != nil || !strings.Contains(cancel, "completed") {
		t.Fatalf("cancel of a completed job: %v\n%s", err, cancel)
	}

	// Errors a person can act on.
	bad, err := run(t, dir, []string{"SCIMESH_COORDINATOR=" + p.URL, "SCIMESH_TOKEN=nope"}, "status", id)
	if err == nil || !strings.Contains(bad, "token") {
		t.Errorf("status with a bad token: %v\n%s", err, bad)
	}
	bad, err = run(t, dir, clientEnv(p.URL), "submit", filepath.Join(dir, "missing.csv"), "--workload", "copy")
	if err == nil || !strings.Contains(bad, "missing.csv") {
		t.Errorf("submit of a missing file: %v\n%s", err, bad)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.csv"), []byte("id,value\na,1\nb,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err = run(t, dir, clientEnv(p.URL), "submit", filepath.Join(dir, "bad.csv"), "--workload", "copy")
	if err == nil || !strings.Contains(bad, "line 3") {
		t.Errorf("submit of a malformed table: %v\n%s", err, bad)
	}
}

// TestWorkerKilledMidTask kills a worker with SIGKILL while it runs a task:
// the task is leased again once its lease expires, and the job ends with
// the same bytes as brute force.
func TestWorkerKilledMidTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 400, 10)
	// The first worker hangs on every task; it is the one killed.
	running := filepath.Join(dir, "running")
	doomed := start(t, dir, workerEnv(p.URL), "worker", "--id", "doomed", "--work-dir", filepath.Join(dir, "w1"),
		"--workload", copyWorkload("touch "+running+"; sleep 600; "))
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "10",
		"--chunk-rows", "100", "--lease-seconds", "5")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)
	var leasedAttempt int
	var leaseEnds time.Time
	// Once a command runs, the worker holds its task: a claim killed
	// before its answer arrived would give the task back at once.
	workerWaitFor(t, 20*time.Second, "the doomed worker to run a task", func() bool { return fileExists(running) })
	workerWaitFor(t, 20*time.Second, "the doomed worker to lease chunk 0", func() bool {
		var tk struct {
			State          string    `json:"state"`
			Attempt        int       `json:"attempt"`
			LeaseExpiresAt time.Time `json:"lease_expires_at"`
		}
		call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
		leasedAttempt, leaseEnds = tk.Attempt, tk.LeaseExpiresAt
		return tk.State == "leased"
	})
	if err := doomed.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.csv")
	if msg, err := run(t, dir, clientEnv(p.URL), "result", jobID, "--output", out); err == nil {
		t.Fatalf("result before completion succeeded: %s", msg)
	}
	start(t, dir, workerEnv(p.URL), "worker", "--id", "healthy", "--work-dir", filepath.Join(dir, "w2"), "--workload", copyWorkload(""))
	workerWaitFor(t, 30*time.Second, "the job to complete", func() bool {
		var j jobOut
		call(t, "GET", p.URL+"/jobs/"+jobID, "ctok", nil, &j)
		return j.Status == "completed"
	})
	if now := time.Now(); now.Before(leaseEnds) {
		t.Errorf("the job completed at %s, before the killed worker's lease ended at %s", now.Format(time.RFC3339Nano), leaseEnds.Format(time.RFC3339Nano))
	}
	var tk struct {
		Attempt    int    `json:"attempt"`
		LeaseOwner string `json:"lease_owner"`
	}
	call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
	if tk.Attempt != leasedAttempt+1 || tk.LeaseOwner != "healthy" {
		t.Errorf("chunk 0 ended at attempt %d by %s, want attempt %d by healthy", tk.Attempt, tk.LeaseOwner, leasedAttempt+1)
	}
	if msg, err := run(t, dir, clientEnv(p.URL), "result", jobID, "--output", out); err != nil {
		t.Fatalf("result: %v %s", err, msg)
	}
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Fatalf("result after a worker was killed:\n%s\nwant:\n%s", got, want)
	}
}

// TestCoordinatorKilledMidJob kills the coordinator with SIGKILL in the
// middle of a job and starts it again on the same database and data
// directory: nothing is lost, and the job completes with the right bytes.
func TestCoordinatorKilledMidJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--db", "sqlite:" + filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data")}
	p := serveOn(t, dir, testenv.FreeAddr(t), tokenEnv, args...) // restarted at the same address below
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 3000, 15)
	// Slow tasks, so that the job is still running when the coordinator dies.
	start(t, dir, workerEnv(p.URL), "worker", "--id", "w", "--concurrency", "3", "--work-dir", filepath.Join(dir, "work"),
		"--workload", copyWorkload("sleep 0.2; "))
	// Short leases: a claim committed just before the kill whose answer
	// never reached the worker leaves a task leased to nobody running it,
	// which comes back only when its lease runs out.
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "15", "--chunk-rows", "100",
		"--lease-seconds", "5")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)
	workerWaitFor(t, 20*time.Second, "some chunks to complete", func() bool {
		var j struct {
			Tasks struct{ Completed int }
		}
		call(t, "GET", p.URL+"/jobs/"+jobID, "ctok", nil, &j)
		return j.Tasks.Completed >= 5
	})
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	// Same address: the worker keeps retrying it with backoff.
	addr := strings.TrimPrefix(p.URL, "http://")
	serveOn(t, dir, addr, tokenEnv, args...)
	workerWaitFor(t, 60*time.Second, "the job to complete after the restart", func() bool {
		var j jobOut
		if s := tryCall(p.URL+"/jobs/"+jobID, "ctok", &j); s != 200 {
			return false
		}
		return j.Status == "completed"
	})
	got, err := runStdout(t, dir, clientEnv(p.URL), "result", jobID)
	if err != nil || got != want {
		t.Fatalf("result after a coordinator restart: %v\n%s\nwant:\n%s", err, got, want)
	}
}

// TestRDKitExample runs examples/rdkit (a workload on the Python package's
// scimesh.run_workload) through a real coordinator and worker on RDKit's
// NCI sample and checks the result against the example's single-process
// reference, which uses RDKit alone. It needs Debian's python3-rdkit and rdkit-data
// (CI installs them); without them it skips, or fails when CI is set.
func TestRDKitExample(t *testing.T) {
	t.Parallel()
	const python, nci = "/usr/bin/python3", "/usr/share/RDKit/Data/NCI/first_5K.smi"
	if err := exec.Command(python, "-c", "import rdkit").Run(); err != nil || !fileExists(nci) {
		msg := "RDKit is not installed (apt-get install python3-rdkit rdkit-data); skipping the rdkit example"
		testenv.Missing(t, msg)
	}
	example, err := filepath.Abs("../../examples/rdkit")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	table := filepath.Join(dir, "nci.csv")
	conv := exec.Command(python, filepath.Join(example, "nci_to_csv.py"), nci)
	data, err := conv.Output()
	if err != nil {
		t.Fatalf("convert the NCI sample: %v", err)
	}
	if err := os.WriteFile(table, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const query, k = "c1ccccc1C(=O)O", "20" // benzoic acid
	ref, err := exec.Command(python, filepath.Join(example, "reference.py"), table, query, k).Output()
	if err != nil {
		t.Fatalf("reference: %v", err)
	}

	pkg, err := filepath.Abs("../../python") // the scimesh package, which score.py runs on
	if err != nil {
		t.Fatal(err)
	}

	p := serveSQLite(t, dir)
	start(t, dir, workerEnv(p.URL), "worker", "--id", "rdkit-1", "--concurrency", "2", "--work-dir", filepath.Join(dir, "work"),
		"--workload", "morgan=PYTHONPATH="+slurm.ShellQuote(pkg)+" "+python+" "+slurm.ShellQuote(filepath.Join(example, "score.py")))
	out := filepath.Join(dir, "out.csv")
	msg, err := run(t, dir, clientEnv(p.URL), "submit", table, "--workload", "morgan", "--param", "query="+query,
		"--top-k", k, "--chunk-rows", "1000", "--wait", "--output", out)
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, msg)
	}
	got, _ := os.ReadFile(out)
	if string(got) != string(ref) {
		t.Fatalf("rdkit result:\n%s\nreference:\n%s", got, ref)
	}
	if !strings.HasPrefix(string(got), "id,score\n") || strings.Count(string(got), "\n") != 21 {
		t.Fatalf("rdkit result is not a header and 20 rows:\n%s", got)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
