package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/show"
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
			p := engine.PruneExpiredParams{Retention: rc.Jobs, UploadRetention: rc.Uploads, DryRun: dryRun, OrphanAge: orphanAge}
			r, err := server.Prune(cmd.Context(), sc.DB, sc.Blobs, sc.DataDir, p)
			if r != nil {
				show.Prune(cmd.OutOrStdout(), r, p)
			}
			if err != nil && r != nil {
				return fmt.Errorf("retention pass stopped part way (what it deleted is listed above; run prune again to go on): %w", err)
			}
			return err
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
