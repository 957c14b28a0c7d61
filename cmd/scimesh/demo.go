package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/demo"
)

func newDemoCmd() *cobra.Command {
	var c demo.Config
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline on a generated data set, in one command",
		Long: `demo starts a coordinator on an embedded SQLite database in a temporary
directory and two workers with the built-in tanimoto workload, generates
200,000 random fingerprints (fixed seed), submits a similarity search for the
10 nearest to a query, shows its progress, prints the top 10 and the wall
time, and checks the result against a direct single-process computation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return demo.Run(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Rows, "rows", 200_000, "fingerprints to generate")
	f.IntVar(&c.Bits, "bits", 2048, "bits per fingerprint (a multiple of 8)")
	f.Float64Var(&c.Density, "density", 0.03, "share of bits set")
	f.Uint64Var(&c.Seed, "seed", 1, "random seed of the data set")
	f.IntVar(&c.Workers, "workers", 2, "worker processes' worth of workers to run")
	f.IntVar(&c.ChunkRows, "chunk-rows", 10_000, "rows per chunk")
	f.IntVar(&c.TopK, "top-k", 10, "rows to keep")
	f.BoolVar(&c.Keep, "keep", false, "keep the temporary directory (data set, database, result)")
	return cmd
}
