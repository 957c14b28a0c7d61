package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// liarWorkload is workload name scoring like copyWorkload, then changing
// every score by appending digit to it: an output that looks right and
// is not.
func liarWorkload(name, digit string) string {
	return name + "=sed -e 1s/value/score/ -e '2,$s/$/" + digit + "/'"
}

// TestQuorumWorkers runs real `scimesh worker` processes with untrusted
// worker keys of four accounts, one of them a liar, against a coordinator
// that is killed with SIGKILL and restarted in the middle: a "trusted" job
// is never claimed by them; an "own" job only by its owner's keys; an
// "any" job completes with quorum 2 and exactly the honest result, every
// chunk accepted from an honest account, while the liar's worker and an
// honest one are killed mid-task; with only liars, the job fails with "no
// quorum".
func TestQuorumWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--db", "sqlite:" + filepath.Join(dir, "scimesh.db"), "--data-dir", filepath.Join(dir, "data")}
	p := serveOn(t, dir, testenv.FreeAddr(t), tokenEnv, args...) // restarted at the same address below
	admin := func(args ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, "ctok", args...)
		if err != nil {
			t.Fatalf("scimesh %v: %v\n%s", args, err, errOut)
		}
		return strings.TrimSpace(out)
	}
	tokens, keys := map[string]string{}, map[string]string{}
	for _, a := range []string{"alice", "bob", "carol", "dave", "erin"} {
		tokens[a] = admin("account", "add", a)
		out, errOut, err := cli(t, dir, p.URL, tokens[a], "worker-key", "add", "k")
		if err != nil {
			t.Fatalf("%s: worker-key add: %v\n%s", a, err, errOut)
		}
		keys[a] = strings.TrimSpace(out)
	}
	worker := func(account, id string, workloads ...string) *binary.Proc {
		args := []string{"worker", "--coordinator", p.URL, "--token", keys[account], "--id", id,
			"--concurrency", "2", "--grace", "300ms", "--work-dir", filepath.Join(dir, "work-"+id)}
		for _, w := range workloads {
			args = append(args, "--workload", w)
		}
		return start(t, dir, nil, args...)
	}
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 400, 10)
	submit := func(account, workload string, flags ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, tokens[account], append([]string{"submit", table, "--workload", workload,
			"--top-k", "10", "--chunk-rows", "50"}, flags...)...)
		if err != nil {
			t.Fatalf("%s: submit %v: %v\n%s", account, flags, err, errOut)
		}
		return strings.TrimSpace(out)
	}
	tasks := func(job string) []taskOut {
		t.Helper()
		var l struct{ Tasks []taskOut }
		if s := call(t, "GET", p.URL+"/jobs/"+job+"/tasks?limit=100", "ctok", nil, &l); s != 200 || len(l.Tasks) != 8 {
			t.Fatalf("tasks of %s: %d, %d tasks", job, s, len(l.Tasks))
		}
		return l.Tasks
	}
	job := func(id string) (j struct{ Status, Error string }) {
		tryCall(p.URL+"/jobs/"+id, "ctok", &j)
		return j
	}
	waitStatus := func(id, status string) {
		t.Helper()
		workerWaitFor(t, 90*time.Second, "job "+id+" to be "+status, func() bool {
			j := job(id)
			if j.Status != status && (j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled") {
				t.Fatalf("job %s is %s (%s); want %s", id, j.Status, j.Error, status)
			}
			return j.Status == status
		})
	}

	// Trusted and own.
	trustedJob := submit("alice", "copy")
	ownJob := submit("bob", "copy", "--workers", "own")
	honest := copyWorkload("sleep 0.1; ")
	bob := worker("bob", "b1", honest)
	worker("carol", "c1", honest)
	waitStatus(ownJob, "completed")
	for _, tk := range tasks(ownJob) {
		if !strings.HasPrefix(tk.LeaseOwner, "bob/k@") {
			t.Errorf("own job: chunk %d was run by %q; want bob's key alone", tk.ChunkIndex, tk.LeaseOwner)
		}
	}
	if got, err := runStdout(t, dir, []string{"SCIMESH_COORDINATOR=" + p.URL, "SCIMESH_TOKEN=" + tokens["bob"]}, "result", ownJob); err != nil || got != want {
		t.Errorf("own job's result: %v\n%s\nwant\n%s", err, got, want)
	}

	// Any, with a liar among honest workers, a worker and the coordinator
	// killed mid-job.
	dave := worker("dave", "d1", liarWorkload("copy", "7"))
	// Short leases, so that the killed workers' replicas expire soon;
	// attempts enough for them, and for leases a slow restart lets run
	// out.
	anyJob := submit("alice", "copy", "--workers", "any", "--lease-seconds", "5", "--max-attempts", "6")
	workerWaitFor(t, 30*time.Second, "the any job to be under way", func() bool {
		for _, tk := range tasks(anyJob) {
			if tk.State == "leased" {
				return true
			}
		}
		return false
	})
	for _, w := range []*binary.Proc{bob, dave} {
		if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		w.Wait()
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	serveOn(t, dir, strings.TrimPrefix(p.URL, "http://"), tokenEnv, args...)
	worker("dave", "d2", liarWorkload("copy", "7"), liarWorkload("lie", "7"))
	worker("erin", "e1", honest, liarWorkload("lie", "3"))
	waitStatus(anyJob, "completed")
	for _, tk := range tasks(anyJob) {
		if a, _, _ := strings.Cut(tk.LeaseOwner, "/"); a != "bob" && a != "carol" && a != "erin" {
			t.Errorf("any job: chunk %d took the output of %q; want an honest account's", tk.ChunkIndex, tk.LeaseOwner)
		}
	}
	if got, err := runStdout(t, dir, clientEnv(p.URL), "result", anyJob); err != nil || got != want {
		t.Errorf("any job's result: %v\n%s\nwant\n%s", err, got, want)
	}
	if ran := usageByWorkerAccount(t, p.URL); ran["dave"] == 0 || ran["carol"] == 0 || ran[""] != 0 {
		t.Errorf("attempts by worker account: %v; want the liar's and the honest keys' replicas, none of the pool", ran)
	}
	for _, tk := range tasks(trustedJob) {
		if tk.State != "pending" || tk.Attempt != 0 {
			t.Errorf("trusted job: chunk %d is %s after %d attempts; untrusted keys must never claim it", tk.ChunkIndex, tk.State, tk.Attempt)
		}
	}

	// Only liars, each in its own way: no quorum.
	liarJob := submit("alice", "lie", "--workers", "any", "--max-attempts", "1")
	waitStatus(liarJob, "failed")
	if j := job(liarJob); !strings.Contains(j.Error, "no quorum: 2 results disagree") {
		t.Errorf("the liars' job failed with %q; want no quorum", j.Error)
	}
}
