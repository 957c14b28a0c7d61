package worker_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/testenv"
	"github.com/scimesh/scimesh/internal/worker"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// framesWorkload is testdata/frames.py as a persistent workload named
// frames, which records its starts in a file of dir and sleeps delay
// seconds before its first chunk; it returns the workload and the file.
func framesWorkload(t *testing.T, delay string) (worker.Workload, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "no python3 on PATH for the persistent workload's script")
	}
	script, err := filepath.Abs("testdata/frames.py")
	if err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(t.TempDir(), "starts")
	wl := mustWorkload(t, fmt.Sprintf("frames=%s %s %s %s", py, script, starts, delay))
	wl.Persistent = true
	return wl, starts
}

// valueChunks returns n chunks of rows id,value and the top k of all
// rows by value, desc, ties in row order, as the final CSV reads (the
// workload copies value into score).
func valueChunks(n, rows, k int) ([]string, string) {
	type row struct {
		id    string
		value int
	}
	var all []row
	var chunks []string
	for c := range n {
		var sb strings.Builder
		sb.WriteString("id,value\n")
		for i := range rows {
			r := row{fmt.Sprintf("r%d-%d", c, i), (c*31 + i*17) % 97}
			all = append(all, r)
			fmt.Fprintf(&sb, "%s,%d\n", r.id, r.value)
		}
		chunks = append(chunks, sb.String())
	}
	slices.SortStableFunc(all, func(a, b row) int { return b.value - a.value })
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"id", "score"})
	for _, r := range all[:k] {
		w.Write([]string{r.id, strconv.Itoa(r.value)})
	}
	w.Flush()
	return chunks, buf.String()
}

// TestPersistentOneStartPerSlot runs 50 chunks of a workload that takes 2 s
// to start on two slots: it starts twice, once per slot, in the frames
// protocol; the result is exact, every chunk's first attempt succeeds and
// each chunk's stderr line is in its own task's log.
func TestPersistentOneStartPerSlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wl, starts := framesWorkload(t, "2")
	b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{wl}})
	chunks, want := valueChunks(50, 20, 15)
	j := b.job(client.JobRequest{Workload: "frames", TopK: 15, LeaseSeconds: 30}, chunks...)
	b.waitJob(j.JobID, client.JobCompleted, 60*time.Second)
	if got := b.result(j.JobID); got != want {
		t.Fatalf("result:\n%s\nwant:\n%s", got, want)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, starts)), "\n")
	if len(lines) != 2 {
		t.Fatalf("the workload started %d times, want once per slot (2):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " frames/1") {
			t.Errorf("a start without SCIMESH_PROTOCOL=frames/1: %q", l)
		}
	}
	for _, tk := range b.tasks(j.JobID) {
		if tk.State != client.TaskCompleted || tk.Attempt != 1 {
			t.Errorf("task %s: state %s attempt %d, want completed at attempt 1", tk.TaskID, tk.State, tk.Attempt)
		}
	}
	chunkLine := regexp.MustCompile(`chunk (\d+) in `)
	for _, tk := range b.tasks(j.JobID) {
		rc, err := b.client.Logs(t.Context(), tk.TaskID, false)
		if err != nil {
			t.Fatal(err)
		}
		logs, _ := io.ReadAll(rc)
		rc.Close()
		found := chunkLine.FindAllStringSubmatch(string(logs), -1)
		if len(found) != 1 || found[0][1] != strconv.Itoa(tk.ChunkIndex) {
			t.Errorf("task %s's log has the stderr lines of chunks %v; want its own chunk's, %d, alone:\n%s", tk.TaskID, found, tk.ChunkIndex, logs)
		}
	}
}

// TestPersistentMisbehaviour has the process crash, hang past the job's
// timeout, answer an error frame and write bytes that are no frame, each
// on the first attempt of one chunk: each costs only that chunk, which
// succeeds on its next attempt, the others succeed at their first, and the
// result is exact. The process is started again after a kill that a chunk
// follows on its slot, but not for the error frame: 3 to 5 starts in all.
func TestPersistentMisbehaviour(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wl, starts := framesWorkload(t, "0")
	r := b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{wl}})
	chunks, want := valueChunks(20, 10, 12)
	bad := map[string]int{"crash": 1, "hang": 2, "error": 3, "garbage": 4}
	params, _ := json.Marshal(bad)
	// The timeout counts the process's start too: a Python that takes
	// seconds to start on a loaded machine must not look like a hang.
	j := b.job(client.JobRequest{Workload: "frames", TopK: 12, LeaseSeconds: 30, TimeoutSeconds: 10, Parameters: params}, chunks...)
	b.waitJob(j.JobID, client.JobCompleted, 90*time.Second)
	if got := b.result(j.JobID); got != want {
		t.Fatalf("result:\n%s\nwant:\n%s", got, want)
	}
	for _, tk := range b.tasks(j.JobID) {
		want := 1
		if slices.Contains([]int{1, 2, 3, 4}, tk.ChunkIndex) {
			want = 2
		}
		if tk.State != client.TaskCompleted || tk.Attempt != want {
			t.Errorf("chunk %d: state %s attempt %d, want completed at attempt %d", tk.ChunkIndex, tk.State, tk.Attempt, want)
		}
	}
	n := len(strings.Split(strings.TrimSpace(readFile(t, starts)), "\n"))
	if n < 3 || n > 5 {
		t.Errorf("the workload started %d times; want 2 and one more after each kill that a chunk followed (3 to 5)", n)
	}
	logs := r.logs.String()
	for _, s := range []string{"broke the protocol", "timed out after 10 s", "ended with the chunk"} {
		if !strings.Contains(logs, s) {
			t.Errorf("the worker's log does not say %q", s)
		}
	}
}

// TestPersistentOutputAfterDone has the process write a second answer
// (output and done frames: a row stray,999) after a chunk's done frame,
// on one slot: the worker does not take it for the next chunk's answer,
// which would put every later answer one chunk off, but kills the process
// and starts a new one for the next chunk. Every chunk succeeds at its first attempt, the
// result is exact (no stray row), and the process started twice.
func TestPersistentOutputAfterDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wl, starts := framesWorkload(t, "0")
	r := b.startWorker(worker.Config{Concurrency: 1, Workloads: []worker.Workload{wl}})
	chunks, want := valueChunks(4, 5, 6)
	params, _ := json.Marshal(map[string]int{"trailing": 0})
	j := b.job(client.JobRequest{Workload: "frames", TopK: 6, LeaseSeconds: 30, Parameters: params}, chunks...)
	b.waitJob(j.JobID, client.JobCompleted, 60*time.Second)
	if got := b.result(j.JobID); got != want {
		t.Errorf("result:\n%s\nwant:\n%s", got, want)
	}
	for _, tk := range b.tasks(j.JobID) {
		if tk.Attempt != 1 {
			t.Errorf("chunk %d completed at attempt %d, want 1", tk.ChunkIndex, tk.Attempt)
		}
	}
	if n := len(strings.Split(strings.TrimSpace(readFile(t, starts)), "\n")); n != 2 {
		t.Errorf("the workload started %d times; want 2: once, and again after the stray output", n)
	}
	r.waitLog(t, "the persistent command wrote to stdout after its last chunk's done or error frame", 5*time.Second)
}

// TestPersistentStopsWithTheWorker stops a worker whose persistent
// processes are up: they are told (their stdin ends), exit, and none is
// left running.
func TestPersistentStopsWithTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wl, starts := framesWorkload(t, "0")
	r := b.startWorker(worker.Config{Concurrency: 2, Workloads: []worker.Workload{wl}})
	chunks, _ := valueChunks(6, 5, 3)
	j := b.job(client.JobRequest{Workload: "frames", TopK: 3, LeaseSeconds: 30}, chunks...)
	b.waitJob(j.JobID, client.JobCompleted, 30*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, starts)), "\n") {
		pid, err := strconv.Atoi(strings.Fields(l)[0])
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	waitGone(t, 5*time.Second, pids...) // the persistent processes end with the worker
	if !strings.Contains(r.logs.String(), "persistent command started") {
		t.Error("the worker did not log its persistent commands' starts")
	}
}

// TestPersistentNeedsACommand refuses a built-in marked persistent.
func TestPersistentNeedsACommand(t *testing.T) {
	t.Parallel()
	wl := mustWorkload(t, "tanimoto")
	wl.Persistent = true
	_, err := worker.New(worker.Config{Client: client.New("http://127.0.0.1:1", "t"), ID: "w", Concurrency: 1, Workloads: []worker.Workload{wl}, WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "persistent") {
		t.Fatalf("New with a persistent built-in = %v, want an error saying only commands can be persistent", err)
	}
}

// TestPersistentIsNoTreeCommand refuses tree slots whose only command is
// persistent: a tree task's command gets its arguments on stdin, not in
// frames, so a persistent one is never offered tree tasks.
func TestPersistentIsNoTreeCommand(t *testing.T) {
	t.Parallel()
	wl := mustWorkload(t, "sum=cat")
	wl.Persistent = true
	_, err := worker.New(worker.Config{Client: client.New("http://127.0.0.1:1", "t"), ID: "w", Concurrency: 1, Workloads: []worker.Workload{wl},
		WorkDir: t.TempDir(), TreeSlots: 1, Trees: scimeshv1connect.NewWorkerClient(http.DefaultClient, "http://127.0.0.1:1")})
	if err == nil || !strings.Contains(err.Error(), "not --persistent") {
		t.Fatalf("New with tree slots and only a persistent command = %v, want an error saying tree tasks need a command that is not persistent", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
