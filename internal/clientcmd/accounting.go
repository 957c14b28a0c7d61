package clientcmd

import (
	"context"
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/show"
)

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
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			rows, err := c.Usage(ctx, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"usage": rows})
			}
			return show.Usage(out, rows, opts.By)
		}),
	}
	cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Since, "since", "", "from this RFC 3339 time or date (default: the oldest kept)")
	f.StringVar(&opts.Until, "until", "", "up to this RFC 3339 time or date, excluded (default: now)")
	f.StringVar(&opts.By, "by", "account", "sum by any of account, workload, day, worker_account, comma-separated")
	f.BoolVar(&asJSON, "json", false, "print the usage as JSON")
	return cmd
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
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.Audit(ctx, opts)
			if err != nil {
				return err
			}
			return printPage(cmd, asJSON, list, list.NextCursor, func(w io.Writer) error { return show.Audit(w, list.Entries) })
		}),
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&opts.Since, "since", "", "only entries at or after this RFC 3339 time or date")
	pageFlags(cmd, "entries", &opts.Limit, &opts.Cursor, &asJSON)
	return cmd
}
