package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/store/migrate"
	"github.com/scimesh/scimesh/internal/store/storeopen"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or list schema migrations",
		Long: `migrate applies every pending migration (up), reverts the newest one
(down), or lists them (status). SQLite also migrates itself when served;
PostgreSQL needs 'scimesh migrate up' or 'scimesh serve --migrate'.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status"},
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			url := e.Setting("db", "DATABASE_URL", config.DefaultDB)
			return runMigrate(cmd.Context(), cmd, url, args[0])
		},
	}
	cmd.Flags().String("db", config.DefaultDB, "database: sqlite:PATH or postgres://… (env DATABASE_URL)")
	return cmd
}

func runMigrate(ctx context.Context, cmd *cobra.Command, url, action string) error {
	if action != "up" && action != "down" && action != "status" {
		return fmt.Errorf("unknown migrate action %q: use up, down or status", action)
	}
	sc, err := storeopen.OpenSchema(ctx, url)
	if err != nil {
		return err
	}
	defer sc.Close()
	db, ms := sc.DB, sc.Migrations
	out := cmd.OutOrStdout()
	switch action {
	case "up":
		done, err := migrate.Up(ctx, db, ms)
		for _, v := range done {
			fmt.Fprintf(out, "applied %04d\n", v)
		}
		if err != nil {
			return err
		}
		if len(done) == 0 {
			fmt.Fprintln(out, "nothing to apply: the schema is up to date")
		}
	case "down":
		v, err := migrate.Down(ctx, db, ms)
		if err != nil {
			return err
		}
		if v == 0 {
			fmt.Fprintln(out, "nothing to revert: no migration is applied")
		} else {
			fmt.Fprintf(out, "reverted %04d\n", v)
		}
	case "status":
		st, err := migrate.Status(ctx, db, ms)
		if err != nil {
			return err
		}
		for _, s := range st {
			mark := "pending"
			if s.Applied {
				mark = "applied"
			}
			fmt.Fprintf(out, "%04d_%s\t%s\n", s.Version, s.Name, mark)
		}
	}
	return nil
}
