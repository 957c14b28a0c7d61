package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/tests/framework/binary"
)

// taskLogRe finds, in a worker's log, when it received each task's claim
// and when the coordinator acknowledged its result.
var taskLogRe = regexp.MustCompile(`(?m)^time=(\S+) level=INFO msg="task (claimed|completed)" .*?\btask_id=(\S+)`)

// busyTime sums, over the tasks a worker's log says it completed, how
// long the worker held each: from its claim to its acknowledged result.
// It returns the sum and the number of tasks.
func busyTime(t *testing.T, log string) (time.Duration, int) {
	t.Helper()
	claimed := map[string]time.Time{}
	var sum time.Duration
	n := 0
	for _, m := range taskLogRe.FindAllStringSubmatch(log, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("time %q in a worker's log: %v", m[1], err)
		}
		if m[2] == "claimed" {
			claimed[m[3]] = at
			continue
		}
		c, ok := claimed[m[3]]
		if !ok {
			t.Fatalf("task %s completed in a worker's log without its claim", m[3])
		}
		sum += at.Sub(c)
		n++
	}
	return sum, n
}

// TestUsageMatchesWorkersBusyTime runs a job on two real worker processes
// and compares what `scimesh usage` says the job's owner used with how
// long the workers' own logs say they held its tasks: within 2%. `scimesh audit` then shows the upload and the job.
func TestUsageMatchesWorkersBusyTime(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		p := serveProc(t, dir, tokenEnv, "--db", newDB(t, dir, pg), "--data-dir", filepath.Join(dir, "data"))
		var workers []*binary.Proc
		for i := range 2 {
			workers = append(workers, start(t, dir, workerEnv(p.URL), "worker", "--id", fmt.Sprintf("w%d", i), "--concurrency", "2",
				"--work-dir", filepath.Join(dir, fmt.Sprintf("work%d", i)), "--workload", copyWorkload("sleep 5; ")))
		}
		table := filepath.Join(dir, "table.csv")
		// Four chunks of 5 s on four slots: the time a task spends in
		// transit, charged or not, is a small part of it.
		writeScoredTable(t, table, 200, 5)
		const chunks = 4
		if msg, err := run(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "5",
			"--chunk-rows", "50", "--wait", "--output", filepath.Join(dir, "out.csv")); err != nil {
			t.Fatalf("submit --wait: %v\n%s", err, msg)
		}

		// The workers log a completion once the coordinator answered it.
		var busy time.Duration
		deadline := time.Now().Add(10 * time.Second)
		for {
			busy = 0
			n := 0
			for _, w := range workers {
				d, k := busyTime(t, w.Stderr.String())
				busy += d
				n += k
			}
			if n == chunks {
				break
			}
			if n > chunks || time.Now().After(deadline) {
				t.Fatalf("the workers logged %d completed tasks, want %d", n, chunks)
			}
			time.Sleep(20 * time.Millisecond)
		}

		out, err := runStdout(t, dir, clientEnv(p.URL), "usage", "--by", "account,workload", "--json")
		if err != nil {
			t.Fatalf("usage --json: %v\n%s", err, out)
		}
		var got struct {
			Usage []struct {
				Account, Workload string
				Tasks             int
				WorkerSeconds     float64 `json:"worker_seconds"`
			}
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("usage --json printed %q: %v", out, err)
		}
		if len(got.Usage) != 1 || got.Usage[0].Account != "admin" || got.Usage[0].Workload != "copy" || got.Usage[0].Tasks != chunks {
			t.Fatalf("usage = %+v; want admin's %d attempts of copy", got.Usage, chunks)
		}
		charged := got.Usage[0].WorkerSeconds
		if diff := math.Abs(charged-busy.Seconds()) / busy.Seconds(); diff > 0.02 {
			t.Errorf("usage charged %.3f s; the workers were busy %.3f s: %.1f%% apart, more than 2%%", charged, busy.Seconds(), 100*diff)
		} else {
			t.Logf("usage charged %.3f s; the workers were busy %.3f s (%.2f%% apart)", charged, busy.Seconds(), 100*diff)
		}

		table2, err := runStdout(t, dir, clientEnv(p.URL), "usage")
		if err != nil || !regexp.MustCompile(`(?m)^ACCOUNT +TASKS +WORKER_SECONDS +WORKER_HOURS\nadmin +4 +\d+\.\d +\d+\.\d\d\n$`).MatchString(table2) {
			t.Errorf("usage printed %q (%v); want a table of admin's 4 tasks", table2, err)
		}
		trail, err := runStdout(t, dir, clientEnv(p.URL), "audit")
		if err != nil || !strings.Contains(trail, "job.create") || !strings.Contains(trail, "upload.create") {
			t.Errorf("audit printed %q (%v); want the upload and the job", trail, err)
		}
	})
}
