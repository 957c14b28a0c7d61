package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
)

// poolLabel shows the worker account of the installation's own workers,
// "" in the API; no account name has parentheses.
const poolLabel = "(pool)"

func newUsageCmd() *cobra.Command {
	var (
		cf     clientFlags
		opts   client.UsageOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the worker time charged to accounts",
		Long: `usage prints the worker time charged to your jobs (to everyone's, with an
admin's token): each attempt's leased time, from its claim to its result,
failure, release, expiry or cancellation, summed by --by. Usage is kept per
hour, by when each attempt ended, for as long as --retention keeps jobs.
--since and --until take an RFC 3339 time or a date (midnight UTC); --until
is excluded, so --since 2026-03-01 --until 2026-04-01 is March.
A worker account of (pool) is the installation's own workers.`,
		Example: `  scimesh usage
  scimesh usage --by account,day --since 2026-03-01
  scimesh usage --by workload,worker_account --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			rows, err := c.Usage(cmd.Context(), opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"usage": rows})
			}
			by := strings.Split(opts.By, ",")
			if opts.By == "" {
				by = []string{"account"}
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			for _, f := range by {
				fmt.Fprintf(tw, "%s\t", strings.ToUpper(strings.TrimSpace(f)))
			}
			fmt.Fprintln(tw, "TASKS\tWORKER_SECONDS\tWORKER_HOURS")
			var tasks int64
			var secs float64
			for _, u := range rows {
				for _, f := range by {
					fmt.Fprintf(tw, "%s\t", usageField(u, strings.TrimSpace(f)))
				}
				fmt.Fprintf(tw, "%d\t%.1f\t%.2f\n", u.Tasks, u.WorkerSeconds, u.WorkerSeconds/3600)
				tasks += u.Tasks
				secs += u.WorkerSeconds
			}
			if len(rows) > 1 {
				fmt.Fprintf(tw, "TOTAL%s\t%d\t%.1f\t%.2f\n", strings.Repeat("\t", len(by)-1), tasks, secs, secs/3600)
			}
			return tw.Flush()
		},
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Since, "since", "", "from this RFC 3339 time or date (default: the oldest kept)")
	f.StringVar(&opts.Until, "until", "", "up to this RFC 3339 time or date, excluded (default: now)")
	f.StringVar(&opts.By, "by", "account", "sum by any of account, workload, day, worker_account, comma-separated")
	f.BoolVar(&asJSON, "json", false, "print the usage as JSON")
	return cmd
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
			return poolLabel
		}
		v = u.WorkerAccount
	}
	if v == nil {
		return "-"
	}
	return *v
}

func newAuditCmd() *cobra.Command {
	var (
		cf     clientFlags
		opts   client.AuditOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit trail, newest first (admins)",
		Long: `audit prints who did what, newest first: accounts and tokens, uploads, jobs
created, cancelled, retried and deleted, and retention passes. An account of
(coordinator) is the coordinator itself (retention) or 'scimesh prune'.
It takes an admin's token. docs/api.md lists the actions.`,
		Example: `  scimesh audit
  scimesh audit --since 2026-03-01 --limit 200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(cmd)
			if err != nil {
				return err
			}
			list, err := c.Audit(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printPage(cmd, asJSON, list, list.NextCursor, "TIME\tACCOUNT\tACTION\tTARGET\tDETAIL", func(tw io.Writer) {
				for _, e := range list.Entries {
					account := e.Account
					if account == "" {
						account = "(coordinator)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Format(time.RFC3339), account, e.Action, e.Target, e.Detail)
				}
			})
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&opts.Since, "since", "", "only entries at or after this RFC 3339 time or date")
	pageFlags(cmd, "entries", &opts.Limit, &opts.Cursor, &asJSON)
	return cmd
}
