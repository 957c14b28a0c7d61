package clientcmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/show"
)

// newWorkerKeyCmd is `scimesh worker-key …`: any account enrols its own
// machines; admins trust them.
func newWorkerKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker-key",
		Short: "Enrol your own machines as workers with keys of your account",
		Long: `worker-key manages the keys with which an account enrols its own machines
as workers: 'scimesh worker --token KEY' works as that account's. A key is
printed once, on standard output, and kept only as a hash. A key is
untrusted until an admin trusts it ('worker-key trust ACCOUNT/NAME'); an
untrusted key's worker runs only jobs submitted with --workers own (its
account's) or --workers any. A revoked key is refused at once, and
the tasks its workers hold go back to pending.`,
	}
	cmd.AddCommand(withHints(newWorkerKeyAddCmd(), newWorkerKeyListCmd(), newWorkerKeyRevokeCmd(),
		newWorkerKeyTrustCmd("trust", true), newWorkerKeyTrustCmd("untrust", false))...)
	return cmd
}

func newWorkerKeyAddCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "add NAME",
		Args:  argsNamed("the new key's name (1 to 63 of a-z, 0-9, '.', '_', '-')"),
		Short: "Make a worker key of your account and print it, once",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			k, err := c.CreateWorkerKey(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created worker key %s/%s, untrusted until an admin trusts it; "+
				"the key is shown this once (only its hash is kept): start a worker with --token KEY\n", k.Account, k.Name)
			fmt.Fprintln(cmd.OutOrStdout(), k.Key)
			return nil
		}),
	}
	cf.register(cmd)
	return cmd
}

func newWorkerKeyListCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "list",
		Args:  cobra.NoArgs,
		Short: "List your worker keys (an admin: everyone's)",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			list, err := c.ListWorkerKeys(ctx)
			if err != nil {
				return err
			}
			return show.WorkerKeys(cmd.OutOrStdout(), list)
		}),
	}
	cf.register(cmd)
	return cmd
}

func newWorkerKeyRevokeCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Args:  argsNamed("the name of your key"),
		Short: "Revoke a worker key of your account: its workers are refused at once",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := c.RevokeWorkerKey(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked worker key %s; %d tasks its workers held went back to pending\n", args[0], n)
			return nil
		}),
	}
	cf.register(cmd)
	return cmd
}

// newWorkerKeyTrustCmd is `worker-key trust` (trusted) or `worker-key
// untrust`.
func newWorkerKeyTrustCmd(use string, trusted bool) *cobra.Command {
	var cf clientFlags
	short := "Trust a worker key (admins): its workers run any job, as the worker token's do"
	if !trusted {
		short = "Take an admin's trust from a worker key: its workers run only jobs open to untrusted workers"
	}
	cmd := &cobra.Command{
		Use:   use + " ACCOUNT/NAME",
		Args:  argsNamed("the key as ACCOUNT/NAME"),
		Short: short,
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			account, name, ok := strings.Cut(args[0], "/")
			if !ok || account == "" || name == "" {
				return fmt.Errorf("%s takes the key as ACCOUNT/NAME (e.g. alice/laptop), not %q", use, args[0])
			}
			k, err := c.TrustWorkerKey(ctx, account, name, trusted)
			if err != nil {
				return err
			}
			show.KeyTrust(cmd.OutOrStdout(), k)
			return nil
		}),
	}
	cf.register(cmd)
	return cmd
}

// newWorkersCmd is `scimesh workers`: the workers seen lately, with the
// key each calls with and its trust.
func newWorkersCmd() *cobra.Command {
	var (
		cf     clientFlags
		opts   client.ListOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the workers seen lately: yours (an admin: every worker)",
		Long: `workers lists the workers the coordinators keep (those seen in the last seven
days), most recently seen first: each worker's own ID, the account and the
worker key it calls with, whether it is trusted, the workloads it runs (any
when it names none), its last call and the tasks it completed. An account
sees the workers of its own keys; an admin every worker, the pool's
(WORKER_AUTH_TOKEN) shown as account (pool). A revoked key's workers stay
listed, untrusted, until they are forgotten.`,
		Example: `  scimesh workers
  scimesh workers --limit 200 --json`,
		Args: cobra.NoArgs,
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListWorkers(ctx, opts)
			if err != nil {
				return err
			}
			return printPage(cmd, asJSON, list, list.NextCursor, func(w io.Writer) error { return show.Workers(w, list.Workers) })
		}),
	}
	cf.register(cmd)
	pageFlags(cmd, "workers", &opts.Limit, &opts.Cursor, &asJSON)
	return cmd
}
