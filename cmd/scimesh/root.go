package main

import (
	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/clientcmd"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "scimesh",
		Short: "SciMesh: a durable task queue for fan-out scientific computing",
		Long: `SciMesh splits a table into chunks, leases them to workers over HTTP,
survives crashes of anything, and stitches each chunk's top-K rows into one
deterministic final CSV.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newMigrateCmd(), newPruneCmd(), newWorkerCmd())
	root.AddCommand(clientcmd.Commands()...)
	root.AddCommand(newDemoCmd(), newSlurmCmd())
	root.AddCommand(newVersionCmd())
	return root
}
