package show

import (
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

var (
	created  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	finished = created.Add(90*time.Second + 250*time.Millisecond)
)

// check fails the test unless got is want, showing both.
func check(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", what, got, want)
	}
}

func TestJob(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	j := &client.Job{JobID: "s0:j1", Name: "mols.csv", Owner: "alice", Workload: "rank", Status: client.JobFailed,
		Progress: 0.5, Tasks: client.TaskCounts{Total: 4, Pending: 0, Leased: 1, Completed: 2, Failed: 1},
		CreatedAt: created, FinishedAt: &finished, Error: "task s0:t3 failed: exit status 2"}
	if err := Job(&b, j); err != nil {
		t.Fatal(err)
	}
	check(t, "a failed job", b.String(), `job       s0:j1
name      mols.csv
owner     alice
workload  rank
status    failed
progress  50.0% (2 of 4 chunks)
tasks     pending 0, leased 1, completed 2, failed 1, cancelled 0
created   2026-03-01T12:00:00Z
finished  2026-03-01T12:01:30Z (1m30.25s)
error     task s0:t3 failed: exit status 2
`)
	// A running job without a name has no name, finished or error line.
	b.Reset()
	j = &client.Job{JobID: "s0:j2", Owner: "admin", Workload: "w", Status: client.JobRunning, CreatedAt: created}
	if err := Job(&b, j); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"name", "finished", "error"} {
		if strings.Contains(b.String(), "\n"+line+" ") {
			t.Errorf("a running job without a name shows a %s line:\n%s", line, b.String())
		}
	}
}

func TestJobs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := Jobs(&b, []client.Job{
		{JobID: "s0:j1", Owner: "alice", Status: client.JobCompleted, Progress: 1, Workload: "rank", Name: "a.csv", CreatedAt: created},
		{JobID: "s0:j22", Owner: "bob", Status: client.JobRunning, Progress: 0.125, Workload: "tanimoto", CreatedAt: created},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two jobs", b.String(), `JOB     OWNER  STATUS     PROGRESS  WORKLOAD  NAME   CREATED
s0:j1   alice  completed  100.0%    rank      a.csv  2026-03-01T12:00:00Z
s0:j22  bob    running    12.5%     tanimoto         2026-03-01T12:00:00Z
`)
}
