package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// TestWorkerKeyWorkers runs real `scimesh worker` processes with worker
// keys: an untrusted key's worker gets nothing and its account's job
// waits, until an admin trusts the key and the same worker completes it,
// charged to the key's account; a key revoked while its worker runs a
// task is refused at once, and the task goes back to pending without the
// attempt held against it, so that a pool worker completes a job of one
// attempt; another account's key does not exist to a non-admin.
func TestWorkerKeyWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	admin := func(args ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, "ctok", args...)
		if err != nil {
			t.Fatalf("scimesh %v: %v\n%s", args, err, errOut)
		}
		return strings.TrimSpace(out)
	}
	alice, bob := admin("account", "add", "alice"), admin("account", "add", "bob")
	as := func(token string, args ...string) (string, string, error) {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, token, args...)
		return strings.TrimSpace(out), errOut, err
	}
	key, errOut, err := as(alice, "worker-key", "add", "laptop")
	if err != nil || !strings.HasPrefix(key, "scimeshw_") || !strings.Contains(errOut, "shown this once") {
		t.Fatalf("worker-key add laptop: %q, %v\n%s", key, err, errOut)
	}
	if s := call(t, "GET", p.URL+"/jobs", key, nil, nil); s != http.StatusForbidden {
		t.Errorf("a worker key on a client route: %d, want 403", s)
	}

	chunk := "id,value\na,1\nb,3\n"
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(chunk)) }))
	defer data.Close()
	sum := sha256.Sum256([]byte(chunk))
	input := map[string]any{"chunks": []map[string]any{{"uri": data.URL + "/c0.csv", "sha256": hex.EncodeToString(sum[:])}}}
	worker := func(token, id string, workloads ...string) *binary.Proc {
		args := []string{"worker", "--coordinator", p.URL, "--token", token, "--id", id, "--grace", "300ms",
			"--work-dir", filepath.Join(dir, "work-"+id), "--allow-input-host", "127.0.0.1/32"}
		for _, w := range workloads {
			args = append(args, "--workload", w)
		}
		return start(t, dir, nil, args...)
	}
	job := func(body map[string]any) string {
		t.Helper()
		body["input"], body["top_k"] = input, 1
		var j jobOut
		if s := call(t, "POST", p.URL+"/jobs", alice, body, &j); s != http.StatusCreated {
			t.Fatalf("create job: %d", s)
		}
		return j.JobID
	}
	type task struct {
		State       string `json:"state"`
		Attempt     int    `json:"attempt"`
		MaxAttempts int    `json:"max_attempts"`
		LeaseOwner  string `json:"lease_owner"`
	}
	taskOf := func(id string) task {
		t.Helper()
		var tasks struct{ Tasks []task }
		if s := call(t, "GET", p.URL+"/jobs/"+id+"/tasks", "ctok", nil, &tasks); s != http.StatusOK || len(tasks.Tasks) != 1 {
			t.Fatalf("tasks of %s: %d %+v", id, s, tasks)
		}
		return tasks.Tasks[0]
	}
	status := func(id string) string {
		var j jobOut
		call(t, "GET", p.URL+"/jobs/"+id, "ctok", nil, &j)
		return j.Status
	}

	// Untrusted: the worker runs and claims, and gets nothing.
	copyJob := job(map[string]any{"workload": "copy"})
	lap := worker(key, "lap1", "copy=sed s/value/score/", "sleep=sleep 60")
	time.Sleep(3 * time.Second)
	if tk := taskOf(copyJob); tk.State != "pending" || tk.Attempt != 0 {
		t.Fatalf("the task after 3 s of an untrusted key's worker: %+v; want pending, never leased", tk)
	}
	select {
	case <-lap.Exited():
		err := lap.Err()
		t.Fatalf("the untrusted key's worker exited (%v); it should wait for work", err)
	default:
	}

	// The Worker service answers an untrusted key's Poll with no task.
	ctx := t.Context()
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, p.URL, withToken(alice))
	rpcWorker := scimeshv1connect.NewWorkerClient(http.DefaultClient, p.URL, withToken(key))
	if _, err := q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:n", Workload: "num"}}})); err != nil {
		t.Fatal(err)
	}
	poll := func() (*connect.Response[v1.Task], error) {
		return rpcWorker.Poll(ctx, connect.NewRequest(&v1.PollRequest{WorkerId: "rpc1", Workloads: []string{"num"}}))
	}
	if got, err := poll(); err != nil || got.Msg.TaskId != "" {
		t.Errorf("an untrusted key's Poll: %v, %v; want no task", got, err)
	}

	// Another account's key does not exist to bob; alice may not trust her own.
	for _, args := range [][]string{{"worker-key", "trust", "alice/laptop"}, {"worker-key", "revoke", "laptop"}} {
		if _, errOut, err := as(bob, args...); err == nil || !strings.Contains(errOut, "does not exist") {
			t.Errorf("bob: scimesh %v: %v\n%s; want not found", args, err, errOut)
		}
	}
	if _, errOut, err := as(alice, "worker-key", "trust", "alice/laptop"); err == nil || !strings.Contains(errOut, "only an admin") {
		t.Errorf("alice trusts her own key: %v\n%s; want refused", err, errOut)
	}
	if out, _, err := as(bob, "worker-key", "list"); err != nil || strings.Contains(out, "laptop") {
		t.Errorf("bob's worker-key list: %q, %v; want none of alice's keys", out, err)
	}

	// Trusted: the same worker completes the job.
	if out := admin("worker-key", "trust", "alice/laptop"); !strings.Contains(out, "trusted yes") {
		t.Fatalf("trust: %q", out)
	}
	if out := admin("worker-key", "list"); !strings.Contains(out, "alice    laptop  yes") {
		t.Errorf("the admin's worker-key list:\n%s\nwant alice's laptop trusted", out)
	}
	if got, err := poll(); err != nil || got.Msg.TaskId == "" {
		t.Errorf("the trusted key's Poll: %v, %v; want the tree task", got, err)
	}
	workerWaitFor(t, 30*time.Second, "the copy job to complete once the key is trusted", func() bool { return status(copyJob) == "completed" })
	if tk := taskOf(copyJob); tk.LeaseOwner != "alice/laptop@lap1" || tk.Attempt != 1 {
		t.Errorf("the completed task: %+v; want attempt 1 by alice/laptop@lap1", tk)
	}

	// Revoked mid-task: refused at once; the task runs again elsewhere.
	sleepJob := job(map[string]any{"workload": "sleep", "max_attempts": 1, "lease_seconds": 15})
	workerWaitFor(t, 30*time.Second, "the key's worker to lease the sleep task", func() bool { return taskOf(sleepJob).State == "leased" })
	if out, errOut, err := as(alice, "worker-key", "revoke", "laptop"); err != nil || !strings.Contains(out, "2 tasks") { // the sleep task and the tree task
		t.Fatalf("revoke laptop: %q, %v\n%s", out, err, errOut)
	}
	if s := call(t, "POST", p.URL+"/tasks/claim", key, map[string]any{"worker_id": "lap1"}, nil); s != http.StatusUnauthorized {
		t.Errorf("a claim with the revoked key: %d, want 401 at once", s)
	}
	if _, err := poll(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a Poll with the revoked key: %v, want unauthenticated at once", err)
	}
	if tk := taskOf(sleepJob); tk.State != "pending" || tk.Attempt != 1 || tk.MaxAttempts != 2 {
		t.Fatalf("the revoked key's task: %+v; want pending at once, with its attempt not held against it", tk)
	}
	worker("wtok", "pool1", "sleep=sed s/value/score/")
	workerWaitFor(t, 30*time.Second, "a pool worker to complete the sleep job", func() bool { return status(sleepJob) == "completed" })
	if tk := taskOf(sleepJob); tk.LeaseOwner != "pool1" || tk.Attempt != 2 {
		t.Errorf("the sleep task: %+v; want attempt 2 by pool1", tk)
	}
	select {
	case <-lap.Exited():
	case <-time.After(30 * time.Second):
		t.Errorf("the revoked key's worker still runs 30 s after the revocation")
	}

	if got, want := usageByWorkerAccount(t, p.URL), map[string]int{"alice": 3, "": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attempts by worker account: %v; want %v (alice's key: a result and two revoked leases; the pool: 1)", got, want)
	}
}

// usageByWorkerAccount is the attempts of all time by worker account, as
// the admin reads them from the coordinator at url ("" is the pool).
func usageByWorkerAccount(t *testing.T, url string) map[string]int {
	t.Helper()
	var usage struct {
		Usage []struct {
			WorkerAccount string `json:"worker_account"`
			Tasks         int    `json:"tasks"`
		}
	}
	if s := call(t, "GET", url+"/usage?by=worker_account", "ctok", nil, &usage); s != 200 {
		t.Fatalf("GET /usage?by=worker_account: %d", s)
	}
	got := map[string]int{}
	for _, u := range usage.Usage {
		got[u.WorkerAccount] = u.Tasks
	}
	return got
}

// TestWorkersCommand: `scimesh workers`, after a pool worker and the
// workers of two accounts' keys have claimed, prints each with its key's
// account and name and its trust: an admin sees all three, an account its
// own alone; a trusted key says yes, a revoked key's worker no. --json
// prints the page as GET /workers gives it.
func TestWorkersCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	run := func(token string, args ...string) string {
		t.Helper()
		out, errOut, err := cli(t, dir, p.URL, token, args...)
		if err != nil {
			t.Fatalf("scimesh %v: %v\n%s", args, err, errOut)
		}
		return out
	}
	tokens := map[string]string{}
	for account, key := range map[string]string{"alice": "laptop", "bob": "desk"} {
		tokens[account] = strings.TrimSpace(run("ctok", "account", "add", account))
		secret := strings.TrimSpace(run(tokens[account], "worker-key", "add", key))
		if s := call(t, "POST", p.URL+"/tasks/claim", secret, map[string]any{"worker_id": account + "-box", "workloads": []string{"dock"}}, nil); s != http.StatusNoContent {
			t.Fatalf("claim of %s's worker: %d", account, s)
		}
	}
	if s := call(t, "POST", p.URL+"/tasks/claim", "wtok", map[string]any{"worker_id": "pool-1"}, nil); s != http.StatusNoContent {
		t.Fatalf("claim of the pool's worker: %d", s)
	}
	// rows maps each worker's ID to its row's columns but the last call.
	rows := func(out string) map[string]string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); got != "ID ACCOUNT KEY TRUSTED WORKLOADS LAST SEEN TASKS DONE" {
			t.Fatalf("header %q", got)
		}
		m := map[string]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) != 7 {
				t.Fatalf("row %q has %d columns, want 7", l, len(f))
			}
			if _, err := time.Parse(time.RFC3339, f[5]); err != nil {
				t.Errorf("row %q: last seen %q is not RFC 3339", l, f[5])
			}
			m[f[0]] = strings.Join(append(f[1:5], f[6]), " ")
		}
		return m
	}
	check := func(who string, got map[string]string, want map[string]string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s workers:\n got %v\nwant %v", who, got, want)
		}
	}
	alice, bob := "laptop no dock 0", "desk no dock 0"
	check("the admin's", rows(run("ctok", "workers")), map[string]string{
		"pool-1": "(pool) - yes any 0", "alice-box": "alice " + alice, "bob-box": "bob " + bob})
	check("alice's", rows(run(tokens["alice"], "workers")), map[string]string{"alice-box": "alice " + alice})
	check("bob's", rows(run(tokens["bob"], "workers")), map[string]string{"bob-box": "bob " + bob})

	run("ctok", "worker-key", "trust", "alice/laptop")
	check("alice's, her key trusted,", rows(run(tokens["alice"], "workers")), map[string]string{"alice-box": "alice laptop yes dock 0"})
	run(tokens["alice"], "worker-key", "revoke", "laptop")
	check("alice's, her key revoked,", rows(run(tokens["alice"], "workers")), map[string]string{"alice-box": "alice " + alice})

	var page struct {
		Workers []struct {
			ID, Account, Key string
			Trusted          bool
		}
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(run("ctok", "workers", "--json", "--limit", "2")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Workers) != 2 || page.NextCursor == "" {
		t.Errorf("--json --limit 2: %+v; want two workers and a cursor", page)
	}
	if _, errOut, err := cli(t, dir, p.URL, "ctok", "workers", "--limit", "1001"); err == nil || !strings.Contains(errOut, "between 1 and 1000") {
		t.Errorf("workers --limit 1001: %v\n%s; want refused", err, errOut)
	}
}
