package show

import (
	"fmt"
	"io"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// Job writes j's status and progress, one field a line.
func Job(w io.Writer, j *client.Job) error {
	tw := table(w)
	fmt.Fprintf(tw, "job\t%s\n", j.JobID)
	if j.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", j.Name)
	}
	fmt.Fprintf(tw, "owner\t%s\n", j.Owner)
	fmt.Fprintf(tw, "workload\t%s\n", j.Workload)
	fmt.Fprintf(tw, "status\t%s\n", j.Status)
	fmt.Fprintf(tw, "progress\t%.1f%% (%d of %d chunks)\n", 100*j.Progress, j.Tasks.Completed, j.Tasks.Total)
	fmt.Fprintf(tw, "tasks\tpending %d, leased %d, completed %d, failed %d, cancelled %d\n",
		j.Tasks.Pending, j.Tasks.Leased, j.Tasks.Completed, j.Tasks.Failed, j.Tasks.Cancelled)
	fmt.Fprintf(tw, "created\t%s\n", j.CreatedAt.Format(time.RFC3339))
	if j.FinishedAt != nil {
		fmt.Fprintf(tw, "finished\t%s (%s)\n", j.FinishedAt.Format(time.RFC3339), j.FinishedAt.Sub(j.CreatedAt).Round(time.Millisecond))
	}
	if j.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", j.Error)
	}
	return tw.Flush()
}

// Jobs writes a table of jobs, a row each.
func Jobs(w io.Writer, jobs []client.Job) error {
	tw := table(w)
	fmt.Fprintln(tw, "JOB\tOWNER\tSTATUS\tPROGRESS\tWORKLOAD\tNAME\tCREATED")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\n", j.JobID, j.Owner, j.Status, 100*j.Progress, j.Workload, j.Name, j.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}
