package show

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestProgress: written to a file that is not a terminal, the bar is a
// line when the job starts and when it ends, not at every change; a note
// has a line of its own.
func TestProgress(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := NewProgress(&b)
	p.Show(&client.Job{Status: client.JobRunning, Progress: 0.25, Tasks: client.TaskCounts{Total: 4, Completed: 1}})
	p.Show(&client.Job{Status: client.JobRunning, Progress: 0.5, Tasks: client.TaskCounts{Total: 4, Completed: 2}})
	p.Note("coordinator unreachable, retrying")
	p.Show(&client.Job{Status: client.JobCompleted, Progress: 1, Tasks: client.TaskCounts{Total: 4, Completed: 4}})
	p.Done()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (start, note, end):\n%s", len(lines), b.String())
	}
	for i, want := range []string{"[#######.......................]  25%  1/4 chunks  running", "coordinator unreachable, retrying",
		"[##############################] 100%  4/4 chunks  completed"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: %q, want it to start %q", i+1, lines[i], want)
		}
	}
}
