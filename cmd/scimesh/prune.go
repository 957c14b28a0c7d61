package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store/storeopen"
)

func newPruneCmd() *cobra.Command {
	var dryRun bool
	var orphanAge time.Duration
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Make one retention pass now: delete old finished jobs, unused uploads and orphan files",
		Long: `prune deletes, now, what the retention loop of 'scimesh serve' deletes every
few minutes: jobs final (completed, failed or cancelled) for longer than
--older-than, with their tasks, logs and results, task trees finished as
long, and usage and audit entries as old; uploads unused for --upload-retention that no unfinished job needs
(a failed or cancelled job keeps its upload, since it may be retried), with
their files; and files of the blob store that no row names, and unfinished
writes of blobs, once --orphan-age old (an hour). It reads the same --db,
--data-dir and --blobs settings (and environment, and .env) as serve, and
may run while coordinators serve the same database.
It works on a database that exists, and creates none. It sweeps only files
named as SciMesh names them, in a blob store bound to this database: the
first upload or pass binds a store to its database, and prune of another
database stops there, deleting nothing.
With --dry-run it deletes nothing and prints what it would delete.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			if orphanAge <= 0 {
				return fmt.Errorf("--orphan-age %v must be positive, such as 1h", orphanAge)
			}
			sc := e.Storage()
			rc, err := e.Retention("older-than")
			if err != nil {
				return err
			}
			return runPrune(cmd.Context(), cmd.OutOrStdout(), sc, engine.PruneExpiredParams{
				Retention: rc.Jobs, UploadRetention: rc.Uploads, DryRun: dryRun, OrphanAge: orphanAge,
			})
		},
	}
	config.AddStorageFlags(cmd.Flags())
	config.AddRetentionFlags(cmd.Flags(), "older-than", "delete jobs final (and trees finished) for longer than this; 0 keeps them "+
		"(default: SCIMESH_RETENTION, else 720h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "delete nothing; print what would be deleted")
	cmd.Flags().DurationVar(&orphanAge, "orphan-age", engine.OrphanAge, "remove files no row names, and unfinished writes of blobs, "+
		"once unwritten for this long; shorter than the pauses of an upload being written would remove it")
	return cmd
}

// runPrune makes one retention pass on the storage sc names and prints
// what it deleted (or would) to out. It works on a database that is there
// (a missing one is refused, not made) and on a blob store bound to it
// (or to none yet: the pass binds it); otherwise it deletes nothing.
func runPrune(ctx context.Context, out io.Writer, sc config.Storage, p engine.PruneExpiredParams) error {
	st, err := storeopen.Open(ctx, sc.DB, storeopen.Options{Existing: true})
	if err != nil {
		return fmt.Errorf("prune works on an existing database (check --db or DATABASE_URL): %w", err)
	}
	defer st.Close()
	blobs, err := storeopen.Blobs(ctx, sc.Blobs, sc.DataDir)
	if err != nil {
		return err
	}
	defer blobs.Close()
	eng := engine.New(st, engine.Config{Blobs: blobs, Logger: slog.New(slog.DiscardHandler)})
	if err := eng.CheckBlobStore(ctx); err != nil {
		return fmt.Errorf("nothing was deleted: %w", err)
	}
	r, err := eng.PruneExpired(ctx, p)
	if r != nil {
		printPrune(out, r, p)
	}
	if err != nil {
		return fmt.Errorf("retention pass stopped part way (what it deleted is listed above; run prune again to go on): %w", err)
	}
	return nil
}

// printPrune writes a pass's report, one line per kind of thing.
func printPrune(out io.Writer, r *engine.PruneReport, p engine.PruneExpiredParams) {
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
