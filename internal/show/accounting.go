package show

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// Usage writes a table of usage rows, summed by the fields of by (as
// GET /usage's by; "" is account), with a total when there are two rows
// or more.
func Usage(w io.Writer, rows []client.Usage, by string) error {
	fields := strings.Split(by, ",")
	if by == "" {
		fields = []string{"account"}
	}
	tw := table(w)
	for _, f := range fields {
		fmt.Fprintf(tw, "%s\t", strings.ToUpper(strings.TrimSpace(f)))
	}
	fmt.Fprintln(tw, "TASKS\tWORKER_SECONDS\tWORKER_HOURS")
	var tasks int64
	var secs float64
	for _, u := range rows {
		for _, f := range fields {
			fmt.Fprintf(tw, "%s\t", usageField(u, strings.TrimSpace(f)))
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\n", u.Tasks, u.WorkerSeconds, u.WorkerSeconds/3600)
		tasks += u.Tasks
		secs += u.WorkerSeconds
	}
	if len(rows) > 1 {
		fmt.Fprintf(tw, "TOTAL%s\t%d\t%.1f\t%.2f\n", strings.Repeat("\t", len(fields)-1), tasks, secs, secs/3600)
	}
	return tw.Flush()
}

// usageField is the value of field f of u as the table shows it.
func usageField(u client.Usage, f string) string {
	var v *string
	switch f {
	case "account":
		v = u.Account
	case "workload":
		v = u.Workload
	case "day":
		v = u.Day
	case "worker_account":
		if u.WorkerAccount != nil && *u.WorkerAccount == "" {
			return pool
		}
		v = u.WorkerAccount
	}
	if v == nil {
		return "-"
	}
	return *v
}

// Audit writes a table of audit entries, a row each; the coordinator's
// own (retention, prune) as account (coordinator).
func Audit(w io.Writer, entries []client.AuditEntry) error {
	tw := table(w)
	fmt.Fprintln(tw, "TIME\tACCOUNT\tACTION\tTARGET\tDETAIL")
	for _, e := range entries {
		account := e.Account
		if account == "" {
			account = "(coordinator)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Format(time.RFC3339), account, e.Action, e.Target, e.Detail)
	}
	return tw.Flush()
}
