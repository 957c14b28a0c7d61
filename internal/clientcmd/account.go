package clientcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/show"
)

// newAccountCmd is `scimesh account …`: admins manage accounts, their
// quotas and tokens; anyone shows its own account.
func newAccountCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account",
		Short: "Manage accounts, their quotas and tokens (admins)",
		Long: `account manages the accounts that share this coordinator: each has its
own tokens, jobs and uploads, a weight in the share of workers, and quotas.
Every subcommand but 'show' without a name needs an admin's token (the
client token, or an admin account's). A token is printed once, on standard
output, and kept only as a hash: hand it over at once.`,
	}
	cmd.AddCommand(newAccountAddCmd(), newAccountListCmd(), newAccountShowCmd(), newAccountSetCmd(),
		newAccountEnableCmd("disable", true), newAccountEnableCmd("enable", false), newAccountTokenCmd())
	for _, c := range cmd.Commands() {
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if e := client.AsError(err); e != nil && e.Status == http.StatusForbidden {
				return fmt.Errorf("%w\n(managing accounts needs an admin's token: the client token, or an admin account's)", err)
			}
			return withHint(cmd, err)
		}
	}
	return cmd
}

// settingFlags are an account's settings as flags; only those given are
// sent, so the coordinator keeps (or defaults) the others.
type settingFlags struct {
	admin                 bool
	weight, running, jobs int
	storage               string
}

func (f *settingFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.admin, "admin", false, "an admin sees everyone's jobs and manages accounts (--admin=false takes it away)")
	fl.IntVar(&f.weight, "weight", 1, "its share of free workers against the other accounts'")
	fl.IntVar(&f.running, "max-running", 0, "at most N of its tasks leased at once; 0 is no limit")
	fl.IntVar(&f.jobs, "max-jobs", 0, "at most N unfinished jobs; 0 is no limit")
	fl.StringVar(&f.storage, "max-storage", "0", "at most SIZE of uploads (10GiB, 500MB, or bytes); 0 is no limit")
}

// settings returns the settings whose flags cmd was given.
func (f *settingFlags) settings(cmd *cobra.Command) (client.AccountSettings, error) {
	var s client.AccountSettings
	fl := cmd.Flags()
	if fl.Changed("admin") {
		s.Admin = &f.admin
	}
	if fl.Changed("weight") {
		s.Weight = &f.weight
	}
	if fl.Changed("max-running") {
		s.MaxRunning = &f.running
	}
	if fl.Changed("max-jobs") {
		s.MaxJobs = &f.jobs
	}
	if fl.Changed("max-storage") {
		n, err := domain.ParseSize(f.storage)
		if err != nil {
			return s, fmt.Errorf("--max-storage: %w", err)
		}
		s.MaxStorage = &n
	}
	return s, nil
}

func newAccountAddCmd() *cobra.Command {
	var (
		cf clientFlags
		sf settingFlags
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Args:  argsNamed("the new account's name (1 to 63 of a-z, 0-9, '.', '_', '-')"),
		Short: "Create an account and print its token, once",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			s, err := sf.settings(cmd)
			if err != nil {
				return err
			}
			a, err := c.CreateAccount(ctx, args[0], s)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created account %s; its token is shown this once (only its hash is kept), hand it over now:\n", a.Name)
			fmt.Fprintln(cmd.OutOrStdout(), a.Token)
			return nil
		}),
	}
	cf.register(cmd)
	sf.register(cmd)
	return cmd
}

func newAccountListCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "list",
		Args:  cobra.NoArgs,
		Short: "List the accounts",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			list, err := c.ListAccounts(ctx)
			if err != nil {
				return err
			}
			return show.Accounts(cmd.OutOrStdout(), list)
		}),
	}
	cf.register(cmd)
	return cmd
}

func newAccountShowCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "show [NAME]",
		Args:  cobra.MaximumNArgs(1),
		Short: "Show an account, its quotas and current use (without NAME: your own)",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			var (
				a   *client.Account
				err error
			)
			if len(args) == 1 {
				a, err = c.GetAccount(ctx, args[0])
			} else {
				a, err = c.Account(ctx)
			}
			if err != nil {
				return err
			}
			return show.Account(cmd.OutOrStdout(), a)
		}),
	}
	cf.register(cmd)
	return cmd
}

func newAccountSetCmd() *cobra.Command {
	var (
		cf clientFlags
		sf settingFlags
	)
	cmd := &cobra.Command{
		Use:   "set NAME",
		Args:  argsNamed("the account's name"),
		Short: "Change an account's weight, quotas or admin flag; the settings not given are kept",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			s, err := sf.settings(cmd)
			if err != nil {
				return err
			}
			if s == (client.AccountSettings{}) {
				return errors.New("nothing to change: give one or more of --admin, --weight, --max-running, --max-jobs, --max-storage")
			}
			return updateAccount(ctx, cmd, c, args[0], s)
		}),
	}
	cf.register(cmd)
	sf.register(cmd)
	return cmd
}

// newAccountEnableCmd is `account disable` (disable) or `account enable`.
func newAccountEnableCmd(use string, disable bool) *cobra.Command {
	var cf clientFlags
	short := "Let an account's tokens in again (those not revoked)"
	if disable {
		short = "Disable an account: its tokens are refused at once, everywhere"
	}
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Args:  argsNamed("the account's name"),
		Short: short,
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			return updateAccount(ctx, cmd, c, args[0], client.AccountSettings{Disabled: &disable})
		}),
	}
	cf.register(cmd)
	return cmd
}

// updateAccount changes account name as s says and shows it.
func updateAccount(ctx context.Context, cmd *cobra.Command, c *client.Client, name string, s client.AccountSettings) error {
	a, err := c.UpdateAccount(ctx, name, s)
	if err != nil {
		return err
	}
	return show.Account(cmd.OutOrStdout(), a)
}

func newAccountTokenCmd() *cobra.Command {
	var (
		cf           clientFlags
		revokeOthers bool
	)
	cmd := &cobra.Command{
		Use:   "token NAME",
		Args:  argsNamed("the account's name"),
		Short: "Issue a new token of an account and print it, once",
		RunE: clientRun(&cf, func(ctx context.Context, cmd *cobra.Command, c *client.Client, args []string) error {
			token, err := c.IssueToken(ctx, args[0], revokeOthers)
			if err != nil {
				return err
			}
			note := ""
			if revokeOthers {
				note = "; its other tokens are revoked"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "a new token of account %s%s. It is shown this once (only its hash is kept), hand it over now:\n", args[0], note)
			fmt.Fprintln(cmd.OutOrStdout(), token)
			return nil
		}),
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&revokeOthers, "revoke-others", false, "revoke every other token of the account, at once")
	return cmd
}
