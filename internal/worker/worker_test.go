package worker_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/internal/worker"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// scoreCommand prints each input row's id and value as the score, with the
// chunk index from the environment: the worker must pick the best rows.
const scoreCommand = `awk -F, 'NR==1 { print "id,score,chunk"; next } { print $1 "," $2 "," ENVIRON["SCIMESH_CHUNK_INDEX"] }'`

func mustWorkload(t *testing.T, spec string) worker.Workload {
	t.Helper()
	wl, err := worker.ParseWorkload(spec)
	if err != nil {
		t.Fatalf("ParseWorkload(%q): %v", spec, err)
	}
	return wl
}

// TestResultMatchesBruteForce runs jobs whose scores tie within and across
// chunks through two worker slots, and checks the final CSV against a
// brute-force ranking of all rows, in both orders.
func TestResultMatchesBruteForce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})

	rng := rand.New(rand.NewPCG(1, 2))
	type row struct {
		id    string
		value int
		chunk int
		seq   int
	}
	var all []row
	var chunks []string
	for c := range 4 {
		var sb strings.Builder
		sb.WriteString("id,value\n")
		for i := range 50 {
			r := row{id: fmt.Sprintf("r%d-%d", c, i), value: rng.IntN(20) - 5, chunk: c, seq: i}
			all = append(all, r)
			fmt.Fprintf(&sb, "%s,%d\n", r.id, r.value)
		}
		chunks = append(chunks, sb.String())
	}
	for _, order := range []string{client.Desc, client.Asc} {
		t.Run(order, func(t *testing.T) {
			const topK = 7
			j := b.job(client.JobRequest{Workload: "score", TopK: topK, Order: order, LeaseSeconds: 10}, chunks...)
			b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)

			want := slices.Clone(all)
			slices.SortStableFunc(want, func(x, y row) int {
				c := cmp.Compare(x.value, y.value)
				if order == client.Desc {
					c = -c
				}
				return cmp.Or(c, cmp.Compare(x.chunk, y.chunk), cmp.Compare(x.seq, y.seq))
			})
			var buf bytes.Buffer
			w := csv.NewWriter(&buf)
			_ = w.Write([]string{"id", "score", "chunk"})
			for _, r := range want[:topK] {
				_ = w.Write([]string{r.id, strconv.Itoa(r.value), strconv.Itoa(r.chunk)})
			}
			w.Flush()
			if got := b.result(j.JobID); got != buf.String() {
				t.Fatalf("result:\n%s\nwant:\n%s", got, buf.String())
			}
			for _, tk := range b.tasks(j.JobID) {
				if tk.State != client.TaskCompleted || tk.Attempt != 1 {
					t.Errorf("task %s: state %s attempt %d, want completed at attempt 1", tk.TaskID, tk.State, tk.Attempt)
				}
			}
		})
	}
	if auth := b.data.authHeaders(); slices.ContainsFunc(auth, func(h string) bool { return h != "" }) {
		t.Fatalf("the data server was sent Authorization headers %q; the worker token must stay with the coordinator", auth)
	}
}

// TestUploadedInputAndLogs runs a job over an upload: the worker downloads
// each chunk from the coordinator itself (with its token), and the
// command's stderr lines reach the task's log.
func TestUploadedInputAndLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	command := `echo "chunk $SCIMESH_CHUNK_INDEX starting" >&2; ` + scoreCommand + `; echo "chunk $SCIMESH_CHUNK_INDEX done" >&2`
	b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{mustWorkload(t, "score="+command)}})
	var table strings.Builder
	table.WriteString("id,value\n")
	for i := range 30 {
		fmt.Fprintf(&table, "r%d,%d\n", i, (i*7)%11)
	}
	up, err := b.client.Upload(t.Context(), strings.NewReader(table.String()))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	j := b.createJob(client.JobRequest{Workload: "score", ChunkRows: 10, TopK: 4, Input: client.JobInput{UploadID: up.UploadID}})
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
	// Values (i*7)%11 of rows 0-29: 10 at rows 3, 14, 25; 9 at rows 6, 17, 28.
	if got, want := b.result(j.JobID), "id,score,chunk\nr3,10,0\nr14,10,1\nr25,10,2\nr6,9,0\n"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	for _, tk := range b.tasks(j.JobID) {
		rc, err := b.client.Logs(t.Context(), tk.TaskID, false)
		if err != nil {
			t.Fatalf("logs: %v", err)
		}
		text, err := io.ReadAll(rc)
		rc.Close()
		want := fmt.Sprintf("chunk %[1]d starting\nchunk %[1]d done\n", tk.ChunkIndex)
		if err != nil || !strings.Contains(string(text), want) {
			t.Errorf("task %s log %q (%v), want it to hold %q", tk.TaskID, text, err, want)
		}
	}
}

// TestCommandEnvironment checks what a command sees: its stdin, its
// directory, the task's variables, and none of the worker's secrets; and
// that its directory is removed afterwards.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("WORKER_AUTH_TOKEN", "secret-worker-token")
	t.Setenv("SCIMESH_TOKEN", "secret-token")
	b := setup(t)
	out := t.TempDir()
	workDir := t.TempDir()
	command := fmt.Sprintf(`cat > input.csv
d=%s/"$SCIMESH_CHUNK_INDEX"
mkdir "$d"
cp input.csv "$d/input"
pwd > "$d/pwd"
env > "$d/env"
echo id,score
echo a,1`, out)
	b.startWorker(worker.Config{WorkDir: workDir, Workloads: []worker.Workload{mustWorkload(t, "probe="+command)}})
	params := json.RawMessage(`{ "query": "ff00", "n": [1, 2] }`)
	chunks := []string{"id,value\nx,1\n", "id,value\ny,2\n\"z\nq\",3\n"}
	j := b.job(client.JobRequest{Workload: "probe", Parameters: params, TopK: 3}, chunks...)
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)

	for _, tk := range b.tasks(j.JobID) {
		d := filepath.Join(out, strconv.Itoa(tk.ChunkIndex))
		read := func(name string) string {
			data, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
		if got := read("input"); got != chunks[tk.ChunkIndex] {
			t.Errorf("chunk %d: stdin %q, want %q", tk.ChunkIndex, got, chunks[tk.ChunkIndex])
		}
		wantDir := filepath.Join(workDir, tk.TaskID, "1")
		if got := strings.TrimSpace(read("pwd")); got != wantDir {
			t.Errorf("chunk %d: ran in %s, want %s", tk.ChunkIndex, got, wantDir)
		}
		env := map[string]string{}
		for _, kv := range strings.Split(read("env"), "\n") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		want := map[string]string{
			"SCIMESH_TASK_ID":     tk.TaskID,
			"SCIMESH_JOB_ID":      j.JobID,
			"SCIMESH_CHUNK_INDEX": strconv.Itoa(tk.ChunkIndex),
			"SCIMESH_ATTEMPT":     "1",
			"SCIMESH_PARAMETERS":  `{"query":"ff00","n":[1,2]}`,
			"SCIMESH_WORKLOAD":    "probe",
			"SCIMESH_TOP_K":       "3",
			"SCIMESH_HAS_HEADER":  "true",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("chunk %d: %s=%q, want %q", tk.ChunkIndex, k, env[k], v)
			}
		}
		for _, k := range []string{"WORKER_AUTH_TOKEN", "SCIMESH_TOKEN"} {
			if v, ok := env[k]; ok {
				t.Errorf("chunk %d: the command sees %s=%q", tk.ChunkIndex, k, v)
			}
		}
		if !strings.Contains(env["PATH"], "/") {
			t.Errorf("chunk %d: PATH %q: the worker's own environment is not passed on", tk.ChunkIndex, env["PATH"])
		}
	}
	entries, err := os.ReadDir(workDir)
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == ".scimesh-worker.lock" })
	if err != nil || len(entries) != 0 {
		t.Fatalf("work directory holds %v (%v) after the tasks ended; want it empty but for the lock file", entries, err)
	}
}

// TestOnlyConfiguredWorkloads checks that a worker never claims a task of a
// workload it was not configured for, even one that comes first in claim
// order, and never runs a command a job names.
func TestOnlyConfiguredWorkloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{mustWorkload(t, "score="+scoreCommand)}})
	other := b.job(client.JobRequest{Workload: "rm-rf", Priority: 100, Parameters: json.RawMessage(`{"command":"touch /tmp/pwned"}`)},
		"id,value\na,1\n", "id,value\nb,2\n")
	mine := b.job(client.JobRequest{Workload: "score", TopK: 1}, "id,value\na,1\n", "id,value\nb,2\n")
	b.waitJob(mine.JobID, client.JobCompleted, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // more claim rounds
	for _, tk := range b.tasks(other.JobID) {
		if tk.State != client.TaskPending || tk.Attempt != 0 {
			t.Errorf("task %s of the unconfigured workload: state %s attempt %d; want pending, never leased", tk.TaskID, tk.State, tk.Attempt)
		}
	}
	if j, _ := b.client.GetJob(t.Context(), other.JobID); j.Status != client.JobPending {
		t.Errorf("job of the unconfigured workload is %s, want pending", j.Status)
	}
}

// TestFailures runs workloads that fail and checks the task's error, how
// often it ran, and the job's end.
func TestFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := "id,value\na,1\n"
	cases := []struct {
		name        string
		command     string
		maxAttempts int
		serve       []byte // what the data server sends instead of the chunk
		want        []string
	}{
		{"exit", `cat >/dev/null; echo "warming up" >&2; echo "disk full on /scratch" >&2; exit 3`, 2, nil,
			[]string{"exited with status 3", "warming up\ndisk full on /scratch"}},
		{"signal", `kill -9 $$`, 1, nil, []string{"killed by signal 9"}},
		{"no-score-column", `echo id,value; echo a,1`, 1, nil, []string{`no column "score"`, `"id", "value"`}},
		{"bad-score", `echo id,score; echo a,1; echo b,NaN`, 1, nil, []string{`output line 3: score "NaN"`}},
		{"empty-output", `cat >/dev/null`, 1, nil, []string{"output is empty"}},
		{"malformed-output", `printf 'id,score\na,1,2\n'`, 1, nil, []string{"output line 2: record has 3 fields; the header has 2"}},
		{"sha256-mismatch", `cat >/dev/null; echo id,score; echo a,1`, 1, []byte("id,value\na,2\n"), []string{"the hosted input's sha256 does not match the job's"}},
		{"size-mismatch", `echo id,score; echo a,1`, 1, []byte("id,value\na,1\nb,2\n"), []string{"the hosted input's size is not the bytes the job names"}},
	}
	var wls []worker.Workload
	for _, c := range cases {
		wls = append(wls, mustWorkload(t, c.name+"="+c.command))
	}
	b.startWorker(worker.Config{Concurrency: 4, Workloads: wls})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req := client.JobRequest{Workload: c.name, MaxAttempts: c.maxAttempts, TopK: 1}
			ref := b.data.host("/fail/"+c.name, []byte(good), nil)
			if c.serve != nil {
				b.data.host("/fail/"+c.name, c.serve, nil)
			}
			req.Input.Chunks = []client.ChunkRef{ref}
			j := b.createJob(req)
			j = b.waitJob(j.JobID, client.JobFailed, 20*time.Second)
			tk := b.tasks(j.JobID)[0]
			if tk.State != client.TaskFailed || tk.Attempt != c.maxAttempts {
				t.Errorf("task: state %s after %d attempts; want failed after %d", tk.State, tk.Attempt, c.maxAttempts)
			}
			for _, w := range c.want {
				if !strings.Contains(tk.Error, w) {
					t.Errorf("task error %q does not say %q", tk.Error, w)
				}
			}
			if !strings.HasPrefix(tk.Error, "worker w-") {
				t.Errorf("task error %q does not name the worker", tk.Error)
			}
			if !strings.Contains(j.Error, tk.TaskID) {
				t.Errorf("job error %q does not name the task %s", j.Error, tk.TaskID)
			}
			if c.name == "exit" {
				// Both attempts' stderr lines are in the task's log.
				rc, err := b.client.Logs(t.Context(), tk.TaskID, false)
				if err != nil {
					t.Fatal(err)
				}
				text, _ := io.ReadAll(rc)
				rc.Close()
				if n := strings.Count(string(text), "disk full on /scratch\n"); n != 2 {
					t.Errorf("task log %q holds the stderr line %d times, want once per attempt", text, n)
				}
			}
		})
	}
}

// TestBuiltinTanimoto runs the built-in workload: good input gives the best
// scores; a bad fingerprint fails the job at the first attempt, naming the
// line.
func TestBuiltinTanimoto(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(worker.Config{Workloads: []worker.Workload{mustWorkload(t, "tanimoto")}})
	params := json.RawMessage(`{"query":"ff00"}`)
	j := b.job(client.JobRequest{Workload: "tanimoto", Parameters: params, TopK: 2},
		"id,fingerprint\nm1,ff00\nm2,0f00\n", "id,fingerprint\nm3,ffff\nm4,f000\n")
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
	// m2, m3 and m4 all score 0.5: the earliest row of the earliest chunk
	// wins the tie.
	if got, want := b.result(j.JobID), "id,score\nm1,1\nm2,0.5\n"; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}

	bad := b.job(client.JobRequest{Workload: "tanimoto", Parameters: params, MaxAttempts: 3},
		"id,fingerprint\nm1,ff00\nm2,zz00\n")
	bad = b.waitJob(bad.JobID, client.JobFailed, 20*time.Second)
	tk := b.tasks(bad.JobID)[0]
	if tk.Attempt != 1 || !strings.Contains(tk.Error, "line 3") {
		t.Fatalf("task of a bad fingerprint: attempt %d, error %q; want a failure for good at attempt 1 naming line 3", tk.Attempt, tk.Error)
	}
}

// sleeper is a command that records its own and its child's process IDs in
// dir and sleeps.
func sleeper(dir string) string {
	return fmt.Sprintf(`echo $$ > %[1]s/"$SCIMESH_CHUNK_INDEX.sh"; sleep 60 & echo $! > %[1]s/"$SCIMESH_CHUNK_INDEX.child"; wait`, dir)
}

// TestCancelKillsCommand cancels a job while its command runs: the worker
// learns it from its next heartbeat and kills the command's whole process
// group.
func TestCancelKillsCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pids := t.TempDir()
	r := b.startWorker(worker.Config{Workloads: []worker.Workload{mustWorkload(t, "sleep="+sleeper(pids))}})
	j := b.job(client.JobRequest{Workload: "sleep", LeaseSeconds: 5}, "id,value\na,1\n")
	sh := readPID(t, filepath.Join(pids, "0.sh"), 10*time.Second)
	child := readPID(t, filepath.Join(pids, "0.child"), 10*time.Second)
	if _, err := b.client.Cancel(t.Context(), j.JobID); err != nil {
		t.Fatal(err)
	}
	// Heartbeats come every third of the 5 s lease.
	took := waitGone(t, 10*time.Second, sh, child)
	t.Logf("command gone %v after the cancel", took.Round(time.Millisecond))
	tk := b.tasks(j.JobID)[0]
	if tk.State != client.TaskCancelled || tk.Attempt != 1 {
		t.Fatalf("task: state %s attempt %d, want cancelled at attempt 1", tk.State, tk.Attempt)
	}
	r.waitLog(t, "task stopped without a report: its lease is gone", 5*time.Second)
}

// TestShutdown stops a worker as SIGTERM does: a task that finishes within
// the grace period is reported as completed; one that does not is killed
// and reported as a retryable failure at once, long before its lease would
// expire.
func TestShutdown(t *testing.T) {
	t.Parallel()
	t.Run("kills after grace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pids := t.TempDir()
		r := b.startWorker(worker.Config{Grace: 200 * time.Millisecond, Workloads: []worker.Workload{mustWorkload(t, "sleep="+sleeper(pids))}})
		j := b.job(client.JobRequest{Workload: "sleep", LeaseSeconds: 120}, "id,value\na,1\n")
		sh := readPID(t, filepath.Join(pids, "0.sh"), 10*time.Second)
		child := readPID(t, filepath.Join(pids, "0.child"), 10*time.Second)
		began := time.Now()
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Far from the 120 s lease, with room for a loaded machine.
		if took := time.Since(began); took > 15*time.Second {
			t.Errorf("shutdown took %v with a 200ms grace period", took)
		}
		waitGone(t, time.Second, sh, child)
		tk := b.tasks(j.JobID)[0]
		if tk.State != client.TaskPending || tk.Attempt != 1 || !strings.Contains(tk.Error, "grace period") {
			t.Fatalf("task after shutdown: state %s attempt %d error %q; want pending again at once, with the reason", tk.State, tk.Attempt, tk.Error)
		}
	})
	t.Run("finishes within grace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		marks := t.TempDir()
		command := fmt.Sprintf(`touch %s/started; sleep 1; echo id,score; echo a,1`, marks)
		r := b.startWorker(worker.Config{Grace: 20 * time.Second, Workloads: []worker.Workload{mustWorkload(t, "slow="+command)}})
		j := b.job(client.JobRequest{Workload: "slow", LeaseSeconds: 120}, "id,value\na,1\n")
		for {
			if _, err := os.Stat(filepath.Join(marks, "started")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		tk := b.tasks(j.JobID)[0]
		if tk.State != client.TaskCompleted {
			t.Fatalf("task after a graceful shutdown: state %s error %q; want completed", tk.State, tk.Error)
		}
	})
}

// TestRefusedToken checks that a worker whose token the coordinator does
// not know stops with an error that says what to fix.
func TestRefusedToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, err := worker.New(worker.Config{
		Client: client.New(b.url, "wrong"), ID: "w1", Concurrency: 2,
		Workloads: []worker.Workload{mustWorkload(t, "tanimoto")}, ClaimWait: time.Second,
		Logger: slogTo(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "401 unauthenticated") || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("Run with a wrong token: %v", err)
	}
}

// TestRefusedTreeToken checks that a worker whose tree slots the Worker
// service refuses stops too, instead of polling forever.
func TestRefusedTreeToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, err := worker.New(worker.Config{
		Client: client.New(b.url, workerToken), ID: "w1", Concurrency: 1,
		Trees:     scimeshv1connect.NewWorkerClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer("wrong"))),
		TreeSlots: 1, Workloads: []worker.Workload{mustWorkload(t, "sum=cat")}, ClaimWait: time.Second, WorkDir: t.TempDir(),
		Logger: slogTo(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(t.Context()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unauthenticated") || !strings.Contains(err.Error(), "--token") {
			t.Fatalf("Run with a tree token the coordinator refuses: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a worker whose tree polls are refused kept running")
	}
}

// TestUnreachableCoordinator checks that a worker keeps trying while the
// coordinator is away, and stops cleanly.
func TestUnreachableCoordinator(t *testing.T) {
	t.Parallel()
	logs := &testenv.Buffer{}
	w, err := worker.New(worker.Config{
		Client: client.New("http://127.0.0.1:1", workerToken), ID: "w1", Concurrency: 1,
		Workloads:  []worker.Workload{mustWorkload(t, "tanimoto")},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Logger: slogTo(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	retries := func() int { return strings.Count(logs.String(), "claim failed; backing off") }
	for deadline := time.Now().Add(20 * time.Second); retries() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d claim retries in 20 s; want several:\n%s", retries(), logs.String())
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestTreeLogStreams checks that a tree task's stderr reaches its log while
// the command still runs, not only once it exits.
func TestTreeLogStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := filepath.Join(t.TempDir(), "release")
	b.startWorker(worker.Config{
		Trees:     scimeshv1connect.NewWorkerClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer(workerToken))),
		TreeSlots: 1,
		Workloads: []worker.Workload{mustWorkload(t, "slow=echo started >&2; while [ ! -f "+release+" ]; do sleep 0.05; done; echo 7")},
	})
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer(clientToken)))
	sub, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "slow"}}}))
	if err != nil {
		t.Fatal(err)
	}
	id := sub.Msg.RootId
	deadline := time.Now().Add(15 * time.Second)
	for {
		rc, err := b.client.Logs(t.Context(), id, false)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(text), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running command's stderr is not in the task's log after 15s: %q", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	info, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: id}))
	if err != nil || info.Msg.State != "leased" {
		t.Fatalf("task while its command waits: %v %v, want leased", info.Msg.GetState(), err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err = q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: id}))
		if err == nil && info.Msg.State == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task after its command was released: %v %v, want completed", info.Msg.GetState(), err)
		}
	}
	if info.Msg.Result.GetNumberValue() != 7 {
		t.Fatalf("result %v, want 7", info.Msg.Result)
	}
}

// TestTreeLeaseRenewed checks that a tree task running longer than its
// lease keeps it: one attempt, completed. (A 10 s lease leaves each renewal
// seconds to get through on a loaded machine.)
func TestTreeLeaseRenewed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(worker.Config{
		Trees:     scimeshv1connect.NewWorkerClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer(workerToken))),
		TreeSlots: 1,
		Workloads: []worker.Workload{mustWorkload(t, "long=sleep 12; echo 1")},
	})
	q := scimeshv1connect.NewQueueClient(http.DefaultClient, b.url, connect.WithInterceptors(rpc.Bearer(clientToken)))
	sub, err := q.Submit(t.Context(), connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{{Id: "s0:x", Workload: "long", LeaseSeconds: 10}}}))
	if err != nil {
		t.Fatal(err)
	}
	var info *v1.TaskInfo
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := q.Query(t.Context(), connect.NewRequest(&v1.QueryRequest{TaskId: sub.Msg.RootId}))
		if err == nil && res.Msg.State == "completed" {
			info = res.Msg
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 12 s tree task with a 10 s lease did not complete in 30 s: %v %v", res.Msg.GetState(), err)
		}
	}
	if info.Attempt != 1 {
		t.Fatalf("the task completed on attempt %d, want 1: its lease was not renewed", info.Attempt)
	}
}
