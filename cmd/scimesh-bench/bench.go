package main

import (
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var c bench.Config
	level := slog.LevelWarn // leaves out the line serve logs at info for every request
	cmd := &cobra.Command{
		Use:   "scimesh-bench",
		Short: "Measure task lifecycles per second through a real server",
		Long: `scimesh-bench starts a coordinator on a real HTTP listener, seeds a backlog of
pending tasks, and drives it with concurrent no-op workers (claim, then
result) until --tasks lifecycles completed. It reports lifecycles per second
and the latency of claims.

--db sqlite:PATH or postgres://… uses that database; "sqlite" (the default)
uses a new SQLite file in a temporary directory, and "postgres" starts a
throwaway PostgreSQL cluster from the installed server binaries.

--coordinator URL drives a coordinator already running in another process
(scimesh serve) instead, so that the load does not share the server's
process: it seeds its own job there over REST (POST /jobs of hosted
chunks, which the no-op workers never fetch), or with --protocol grpc
single-task trees (Queue.Submit) that the workers lease with the Worker
service's Poll and report with Done. The tokens are WORKER_AUTH_TOKEN and
CLIENT_AUTH_TOKEN from the environment unless --worker-token and
--client-token are given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Logger = newLogger(level)
			if !cmd.Flags().Changed("worker-token") {
				c.WorkerToken = os.Getenv("WORKER_AUTH_TOKEN")
			}
			if !cmd.Flags().Changed("client-token") {
				c.ClientToken = os.Getenv("CLIENT_AUTH_TOKEN")
			}
			return bench.Run(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	cmd.AddCommand(newBenchUploadCmd(), newBenchSmallCmd())
	f := cmd.Flags()
	f.StringVar(&c.DB, "db", "sqlite", `database: "sqlite", "postgres", sqlite:PATH or postgres://…`)
	f.IntVar(&c.Workers, "workers", 32, "concurrent workers")
	f.IntVar(&c.Backlog, "backlog", 10000, "pending tasks left over when the measured ones are done")
	f.IntVar(&c.Tasks, "tasks", 30000, "task lifecycles to measure")
	f.IntVar(&c.Batch, "batch", 1, "tasks per claim (max_tasks) and per result request; 1 uses the single forms")
	f.IntVar(&c.CreateChunks, "create-chunks", 0, "while the workers run, create a job of this many hosted chunks over REST and report the workers' throughput and worst waits during its creation; --tasks must outlast it")
	f.StringVar(&c.Profile, "cpuprofile", "", "write a CPU profile of the measured part to this file")
	f.StringVar(&c.Coordinator, "coordinator", "", "drive the coordinator at this URL, running in another process, instead of starting one (--db is not used)")
	f.StringVar(&c.WorkerToken, "worker-token", "", "with --coordinator, the worker token (default $WORKER_AUTH_TOKEN)")
	f.StringVar(&c.ClientToken, "client-token", "", "with --coordinator, the client token, for seeding and counting (default $CLIENT_AUTH_TOKEN)")
	f.StringVar(&c.Protocol, "protocol", bench.ProtocolREST, "with --coordinator, how the workers talk: rest (claim and result) or grpc (Worker.Poll and Done on tree tasks; --batch 1)")
	f.StringVar(&c.Load, "load", bench.LoadClient, "the REST load generator: client (internal/client on net/http, the worker's own) or lean (fasthttp, a fraction of its CPU per request, for a figure that is more the server's on cores the two share)")
	f.StringVar(&c.Shard, "shard", "s0", "with --protocol grpc, the coordinator's shard, which the seeded trees name")
	f.TextVar(&level, "log-level", &level, "the server's log level, to stderr: info logs every request as serve does by default")
	f.IntVar(&c.Accounts, "accounts", 0, "with --coordinator and --seed-db, make the tasks the work of this many accounts and report how the lifecycles were shared")
	f.IntVar(&c.JobsPerAccount, "jobs-per-account", 1, "with --accounts, each account's jobs")
	f.IntSliceVar(&c.Weights, "weights", nil, "with --accounts, the accounts' weights in turn, such as 1,3 (default 1)")
	f.StringVar(&c.SeedDB, "seed-db", "", "with --accounts, the --db of the coordinator at --coordinator, where the accounts and their jobs are made")
	f.DurationVar(&c.TaskTime, "task-time", 0, "how long a worker holds each task before its result")
	f.StringSliceVar(&c.WorkerTokens, "worker-tokens", nil, "with --coordinator, the tokens the workers use in turn (worker keys of several accounts, say) in place of --worker-token")
	f.StringVar(&c.Version, "workload-version", "", "with --coordinator, the workload version the workers announce and send with results, as scimesh worker does (the chunk cache then remembers every output)")
	f.BoolVar(&c.AnnounceLate, "announce-late", false, "with --workload-version, announce the version only with the workers' first claims, after the job is created, so that every claim looks its chunks up in the chunk cache")
	f.StringVar(&c.JobWorkers, "job-workers", "", `with --coordinator, the seeded job's workers: trusted, own or any`)
	f.IntVar(&c.Quorum, "quorum", 0, `with --coordinator and --job-workers any, the seeded job's quorum`)
	return cmd
}

func newBenchSmallCmd() *cobra.Command {
	var c bench.SmallConfig
	cmd := &cobra.Command{
		Use:   "small",
		Short: "Measure how long a small job waits behind another account's big one",
		Long: `scimesh-bench small makes two accounts in the database of the coordinator at
--coordinator (--seed-db, its --db): one submits a job of --big chunks,
--workers workers work on it, holding each task --task-time, and --delay
later the other submits a job of --small chunks. It reports how long the
small job took from its creation until it was completed, against its own
work (--small × --task-time). The tokens are WORKER_AUTH_TOKEN and
CLIENT_AUTH_TOKEN from the environment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.WorkerToken, c.ClientToken = os.Getenv("WORKER_AUTH_TOKEN"), os.Getenv("CLIENT_AUTH_TOKEN")
			return bench.RunSmall(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Coordinator, "coordinator", "", "the coordinator's URL (scimesh serve, in another process)")
	f.StringVar(&c.SeedDB, "seed-db", "", "the coordinator's --db, where the accounts and jobs are made")
	f.StringVar(&c.Shard, "shard", "s0", "the coordinator's shard")
	f.IntVar(&c.Workers, "workers", 2, "workers")
	f.DurationVar(&c.TaskTime, "task-time", 200*time.Millisecond, "how long a worker holds each task")
	f.IntVar(&c.Big, "big", 300, "chunks of the big job")
	f.IntVar(&c.Small, "small", 4, "chunks of the small job")
	f.DurationVar(&c.Delay, "delay", 2*time.Second, "how long after the big job the small one is created")
	return cmd
}

func newBenchUploadCmd() *cobra.Command {
	var c bench.UploadConfig
	cmd := &cobra.Command{
		Use:   "upload",
		Short: "Measure upload plus chunking in MB/s, beside reading the file with cat",
		Long: `scimesh-bench upload writes a CSV of --size bytes (or uses --file), then, --runs
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
