// Package clientcmd is the command line of a coordinator's users: submit,
// wait, status, jobs, result, logs, cancel, retry, usage, audit, workers,
// account and worker-key. Each is a cobra command that reads its flags,
// calls the coordinator through internal/client and prints through
// internal/show; none opens a database or picks a store, so the package
// needs nothing of the coordinator's. cmd/scimesh adds them to its root,
// as etcdctl's commands live apart from etcd's server.
package clientcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/show"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	coordinator string
	token       string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.coordinator, "coordinator", config.DefaultCoordinator, "coordinator URL (env SCIMESH_COORDINATOR)")
	cmd.Flags().StringVar(&f.token, "token", "", "your account's token, or the client token (env SCIMESH_TOKEN)")
}

// client resolves the coordinator and token (flags, then environment, then
// .env) and returns a client of it, which warns on stderr once when it
// sends the token over plain http beyond loopback.
func (f *clientFlags) client(cmd *cobra.Command) (*client.Client, error) {
	e, err := config.Load(cmd.Flags())
	if err != nil {
		return nil, err
	}
	base := e.Setting("coordinator", "SCIMESH_COORDINATOR", config.DefaultCoordinator)
	token := e.Setting("token", "SCIMESH_TOKEN", "")
	stderr := cmd.ErrOrStderr()
	warn := func(msg string) { fmt.Fprintln(stderr, "warning: "+msg) }
	return client.New(base, token, client.WithUserAgent("scimesh-cli"), client.WithWarn(warn)), nil
}

// Commands returns the client commands, for the root command to add.
func Commands() []*cobra.Command {
	cmds := withHints(newSubmitCmd(), newWaitCmd(), newStatusCmd(), newJobsCmd(), newResultCmd(), newLogsCmd(), newCancelCmd(), newRetryCmd(),
		newUsageCmd(), newAuditCmd(), newWorkersCmd())
	return append(cmds, newAccountCmd(), newWorkerKeyCmd())
}

// withHints makes each of cmds add withHint's hint to its error, and
// returns them.
func withHints(cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error { return withHint(cmd, run(cmd, args)) }
	}
	return cmds
}

// clientRun is the RunE of a client command: it makes the client of cf
// and runs fn with it, under a context that SIGINT and SIGTERM cancel.
func clientRun(cf *clientFlags, fn func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := cf.client(cmd)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return fn(ctx, cmd, c, args)
	}
}

// withHint adds show.Hint's hint to err, unless the command was stopped.
func withHint(cmd *cobra.Command, err error) error {
	if h := show.Hint(err); h != "" && cmd.Context().Err() == nil {
		return fmt.Errorf("%w\n(%s)", err, h)
	}
	return err
}

// pageFlags registers the flags of a listing of pages of what (plural):
// --limit, --cursor and --json.
func pageFlags(cmd *cobra.Command, what string, limit *int, cursor *string, asJSON *bool) {
	f := cmd.Flags()
	f.IntVar(limit, "limit", 0, what+" per page, 1-1000 (default 50)")
	f.StringVar(cursor, "cursor", "", "continue a listing")
	f.BoolVar(asJSON, "json", false, "print the page as JSON")
}

// printPage prints a page of a listing: with asJSON, page as JSON; else
// as table writes it, then, when there is a next page, on standard error
// how to list it.
func printPage(cmd *cobra.Command, asJSON bool, page any, next string, table func(io.Writer) error) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(page)
	}
	if err := table(out); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: scimesh %s --cursor %s\n", cmd.Name(), next)
	}
	return nil
}

// argsNamed is cobra.ExactArgs(1) with an error that names the argument.
func argsNamed(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s takes one argument, %s; see 'scimesh %s --help'", cmd.Name(), what, cmd.Name())
		}
		return nil
	}
}
