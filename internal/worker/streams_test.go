package worker_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// TestStdinIsTheChunkFile checks that a command's stdin is a regular file
// holding the chunk, read from its start, and that the command finds its
// directory as empty as before: the file's name is gone from it.
func TestStdinIsTheChunkFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	command := `kind=$(stat -L -c %F /dev/stdin | tr ' ' _)
entries=$(ls -A | wc -l | tr -d ' ')
bytes=$(wc -c | tr -d ' ')
echo id,score
echo "stdin-$kind,3"
echo "bytes-$bytes,2"
echo "entries-$entries,1"`
	b.startWorker(worker.Config{Workloads: []worker.Workload{mustWorkload(t, "probe="+command)}})
	chunk := "id,value\na,1\nb,2\n"
	j := b.job(client.JobRequest{Workload: "probe", TopK: 3, MaxAttempts: 1}, chunk)
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)
	want := fmt.Sprintf("id,score\nstdin-regular_file,3\nbytes-%d,2\nentries-0,1\n", len(chunk))
	if got := b.result(j.JobID); got != want {
		t.Fatalf("the command saw\n%s\nwant\n%s", got, want)
	}
}

// TestBadInputNeverStartsCommand checks that a chunk that does not match
// its task (sha256, size) or is over --max-input-bytes fails the attempt
// without the command ever starting; the good chunk beside them shows
// that the command would have left its mark.
func TestBadInputNeverStartsCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	marks := t.TempDir()
	command := fmt.Sprintf(`touch %s/"$SCIMESH_JOB_ID"; cat >/dev/null; echo id,score; echo a,1`, marks)
	b.startWorker(worker.Config{Concurrency: 2, MaxInputBytes: 64, Workloads: []worker.Workload{mustWorkload(t, "mark="+command)}})

	good := []byte("id,value\na,1\n")
	big := []byte("id,value\n" + strings.Repeat("row,1\n", 20))
	cases := []struct {
		name  string
		serve []byte // what the data server sends for the good chunk
		bytes int64  // the size the task names; -1: good's
		want  string // in the task's error; what was seen is in the worker's log
	}{
		{"sha256", []byte("id,value\na,2\n"), -1, "the hosted input's sha256 does not match the job's"},
		{"longer", []byte("id,value\na,1\nb,2\n"), -1, "the hosted input's size is not the bytes the job names"},
		{"shorter", []byte("id,value\n"), -1, "the hosted input's size is not the bytes the job names"},
		{"over-max-input-bytes", big, 0, "larger than 64 bytes"},
	}
	jobs := map[string]string{}
	for _, c := range cases {
		path := "/bad/" + c.name
		ref := b.data.host(path, good, nil)
		b.data.host(path, c.serve, good)
		if c.bytes >= 0 {
			ref.Bytes = c.bytes
		}
		j := b.createJob(client.JobRequest{Workload: "mark", MaxAttempts: 1, Input: client.JobInput{Chunks: []client.ChunkRef{ref}}})
		jobs[c.name] = j.JobID
	}
	control := b.job(client.JobRequest{Workload: "mark", MaxAttempts: 1}, string(good))

	for _, c := range cases {
		b.waitJob(jobs[c.name], client.JobFailed, 20*time.Second)
		tk := b.tasks(jobs[c.name])[0]
		if !strings.Contains(tk.Error, c.want) {
			t.Errorf("%s: task error %q does not say %q", c.name, tk.Error, c.want)
		}
		if _, err := os.Stat(marks + "/" + jobs[c.name]); err == nil {
			t.Errorf("%s: the command ran on a chunk that does not match its task", c.name)
		}
	}
	b.waitJob(control.JobID, client.JobCompleted, 20*time.Second)
	if _, err := os.Stat(marks + "/" + control.JobID); err != nil {
		t.Fatalf("the command on the good chunk left no mark: %v", err)
	}
}

// TestLargeOutputTopK runs a command that prints 51 MB of rows (3.2
// million, many scores tied) and checks the kept rows against a
// brute-force ranking: the large pipe and buffers lose and reorder
// nothing.
func TestLargeOutputTopK(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows, mod, topK = 3_200_000, 1_000_003, 10
	command := fmt.Sprintf(`cat >/dev/null; awk 'BEGIN { print "id,score"; for (i = 0; i < %d; i++) printf "r%%d,%%d\n", i, (i * 7919) %% %d }'`, rows, mod)
	b.startWorker(worker.Config{Workloads: []worker.Workload{mustWorkload(t, "flood="+command)}})
	j := b.job(client.JobRequest{Workload: "flood", TopK: topK, MaxAttempts: 1, LeaseSeconds: 60}, "id,value\na,1\n")

	// The best rows, higher scores first and ties to the earlier row.
	type row struct{ i, score int }
	var best []row
	for i := range rows {
		r := row{i, i * 7919 % mod}
		at := len(best)
		for at > 0 && best[at-1].score < r.score {
			at--
		}
		if at < topK {
			best = append(best[:at], append([]row{r}, best[at:]...)...)
			best = best[:min(len(best), topK)]
		}
	}
	var want strings.Builder
	want.WriteString("id,score\n")
	for _, r := range best {
		fmt.Fprintf(&want, "r%d,%d\n", r.i, r.score)
	}

	b.waitJob(j.JobID, client.JobCompleted, 120*time.Second)
	if got := b.result(j.JobID); got != want.String() {
		t.Fatalf("result\n%s\nwant\n%s", got, want.String())
	}
	if tk := b.tasks(j.JobID)[0]; tk.Attempt != 1 {
		t.Fatalf("task took %d attempts, want 1", tk.Attempt)
	}
}

// TestEndlessOutputLine runs a command whose second output line goes on
// for 96 MiB: the worker refuses it once 64 MiB of it have come, the
// bound on a record, and fails the attempt saying so.
func TestEndlessOutputLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	command := `cat >/dev/null; echo id,score; head -c 100663296 /dev/zero | tr '\0' x`
	b.startWorker(worker.Config{Workloads: []worker.Workload{mustWorkload(t, "endless="+command)}})
	j := b.job(client.JobRequest{Workload: "endless", MaxAttempts: 1, LeaseSeconds: 60}, "id,value\na,1\n")
	b.waitJob(j.JobID, client.JobFailed, 60*time.Second)
	const want = "the workload's output is unusable: invalid argument: output: the record after line 1 is longer than 64 MiB"
	if tk := b.tasks(j.JobID)[0]; !strings.Contains(tk.Error, want) {
		t.Fatalf("task error %q, want it to say %q", tk.Error, want)
	}
}
