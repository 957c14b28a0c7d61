package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var c bench.Config
	level := slog.LevelWarn // leaves out the line serve logs at info for every request
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure task lifecycles per second through a real server",
		Long: `bench starts a coordinator on a real HTTP listener, seeds a backlog of
pending tasks, and drives it with concurrent no-op workers (claim, then
result) until --tasks lifecycles completed. It reports lifecycles per second
and the latency of claims.

--db sqlite:PATH or postgres://… uses that database; "sqlite" (the default)
uses a new SQLite file in a temporary directory, and "postgres" starts a
throwaway PostgreSQL cluster from the installed server binaries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Logger = newLogger(level)
			return bench.Run(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	cmd.AddCommand(newBenchUploadCmd())
	f := cmd.Flags()
	f.StringVar(&c.DB, "db", "sqlite", `database: "sqlite", "postgres", sqlite:PATH or postgres://…`)
	f.IntVar(&c.Workers, "workers", 32, "concurrent workers")
	f.IntVar(&c.Backlog, "backlog", 10000, "pending tasks left over when the measured ones are done")
	f.IntVar(&c.Tasks, "tasks", 30000, "task lifecycles to measure")
	f.IntVar(&c.Batch, "batch", 1, "tasks per claim (max_tasks) and per result request; 1 uses the single forms")
	f.IntVar(&c.CreateChunks, "create-chunks", 0, "while the workers run, create a job of this many hosted chunks over REST and report the workers' throughput and worst waits during its creation; --tasks must outlast it")
	f.StringVar(&c.Profile, "cpuprofile", "", "write a CPU profile of the measured part to this file")
	f.TextVar(&level, "log-level", &level, "the server's log level, to stderr: info logs every request as serve does by default")
	return cmd
}

func newBenchUploadCmd() *cobra.Command {
	var c bench.UploadConfig
	cmd := &cobra.Command{
		Use:   "upload",
		Short: "Measure upload plus chunking in MB/s, beside reading the file with cat",
		Long: `bench upload writes a CSV of --size bytes (or uses --file), then, --runs
times: reads it with 'cat FILE >/dev/null', uploads it through a real
coordinator's POST /upload (streamed, checked, normalized, hashed, synced),
and creates a job over it (the chunking pass). It reports each step in MB/s,
medians of the runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.RunUpload(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&c.Size, "size", 1<<30, "bytes of CSV to generate")
	f.IntVar(&c.Runs, "runs", 3, "measured runs")
	f.IntVar(&c.ChunkRows, "chunk-rows", 10_000, "rows per chunk of the job")
	f.StringVar(&c.File, "file", "", "measure this CSV instead of a generated one")
	f.StringVar(&c.Profile, "cpuprofile", "", "write a CPU profile to this file")
	f.BoolVar(&c.Cold, "cold", false, "drop the page cache before cat and before the upload (needs root), so both read the disk")
	return cmd
}
