package show

import (
	"fmt"
	"io"
	"time"

	"github.com/scimesh/scimesh/internal/engine"
)

// Prune writes a retention pass's report, one line per kind of thing;
// p is what the pass was asked.
func Prune(out io.Writer, r *engine.PruneReport, p engine.PruneExpiredParams) {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	when := func(d time.Duration, t time.Time) string {
		if d == 0 {
			return "kept: retention 0"
		}
		return "older than " + d.String() + ", before " + t.Format(time.RFC3339)
	}
	fmt.Fprintf(out, "%s %d jobs and %d trees (%s)\n", verb, r.Jobs, r.Trees, when(p.Retention, r.Before))
	if !r.DryRun {
		fmt.Fprintf(out, "%s %d tasks, %d log lines and %d task arguments\n", verb, r.Tasks, r.Logs, r.Args)
		fmt.Fprintf(out, "%s %d rows of usage and %d audit entries (%s)\n", verb, r.Usage, r.Audit, when(p.Retention, r.Before))
	}
	fmt.Fprintf(out, "%s %d uploads, %d bytes of files (%s)\n", verb, r.Uploads, r.UploadBytes, when(p.UploadRetention, r.UploadsBefore))
	fmt.Fprintf(out, "%s %d files that no row names, %d bytes (unwritten since %s)\n", verb, r.Files, r.FileBytes, r.Orphaned.Format(time.RFC3339))
	if r.DryRun {
		fmt.Fprintln(out, "dry run: nothing was deleted")
	}
}
