// Package show writes what a coordinator answers as text for people: a
// job's status, the tables of jobs, accounts, worker keys, workers, usage
// and the audit trail, and a job's progress on a terminal. It is the
// command line's presentation; the commands choose what to ask and where
// to write, and --json bypasses it.
package show

import (
	"io"
	"text/tabwriter"
	"time"
)

// table is a writer of columns apart by tabs, aligned with two spaces.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// instant is t as the tables show times: RFC 3339, in UTC.
func instant(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
