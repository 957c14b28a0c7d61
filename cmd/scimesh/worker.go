package main

import (
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/rpc"
	"github.com/scimesh/scimesh/internal/worker"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

func newWorkerCmd() *cobra.Command {
	var (
		concurrency int
		workloads   []string
		persistent  []string
		versions    []string
		grace       time.Duration
		keepDirs    bool
		treeSlots   int
		allowHosts  []string
		maxInput    int64
		passEnv     []string
	)
	cmd := &cobra.Command{
		Use:   "worker --workload NAME=COMMAND… [flags]",
		Short: "Run the worker daemon: claim tasks, run them, report the best rows",
		Long: `Run the worker daemon. It claims tasks of the configured workloads only,
downloads each chunk, runs the workload's command with the chunk on stdin
(as /bin/sh -c COMMAND, in WORK_DIR/TASK_ID/ATTEMPT/, with SCIMESH_TASK_ID,
SCIMESH_JOB_ID, SCIMESH_CHUNK_INDEX, SCIMESH_ATTEMPT and SCIMESH_PARAMETERS
in its environment), keeps the best top_k rows of the CSV it prints, and
reports them. --workload NAME (no command) turns on a built-in: tanimoto.

Commands see only PATH, HOME, LANG, LC_*, TZ and TMPDIR of the worker's
environment, the task's SCIMESH_ variables and what --pass-env names. On
Linux each runs under a small supervisor (this binary again) that kills the
command and every process it started when the worker dies, even by
SIGKILL. Hosted chunks (a job's input.chunks URIs) are fetched without the
token and never from loopback or link-local addresses unless
--allow-input-host allows them; with --allow-input-host, only from the
hosts it names.

On SIGTERM or SIGINT it stops claiming, lets running tasks finish within
--grace, kills the rest and reports them as failures so that they are leased
again at once, and exits 0.

With --max-runtime or --until (a batch allocation's walltime) it claims
only while at least a lease is left before that moment, and at it kills its
running tasks and releases them (pending again at once, the attempt not
counted) and exits 0; it exits 0 too once it will claim no more and nothing
runs. SIGUSR1 does the same at once, at any time: the warning that the
allocation ends (sbatch --signal=B:USR1@SECONDS).`,
		Example: `  scimesh worker --coordinator http://coord:8080 --id node-7 --concurrency 8 \
    --workload tanimoto --workload 'dock=/opt/dock/score.sh --fast'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			coordinator := e.Setting("coordinator", "SCIMESH_COORDINATOR", config.DefaultCoordinator)
			// A worker next to its coordinator may share its .env: the
			// worker token is the fallback.
			token := e.Setting("token", "SCIMESH_TOKEN", e.Get("WORKER_AUTH_TOKEN"))
			id := e.Setting("id", "SCIMESH_WORKER_ID", config.DefaultWorkerID())
			workDir := e.Setting("work-dir", "SCIMESH_WORK_DIR", config.DefaultWorkDir)
			deadline, err := e.Deadline(time.Now())
			if err != nil {
				return err
			}
			wls, err := worker.ParseWorkloads(workloads, persistent, versions)
			if err != nil {
				return err
			}
			log := config.NewLogger(slog.LevelInfo)
			// The client warns once when it sends the token in the clear;
			// Trees sends it to the same coordinator, so that warning
			// covers its calls too.
			c := client.New(coordinator, token, client.WithUserAgent("scimesh-worker/"+id),
				client.WithWarn(func(msg string) { log.Warn(msg) }))
			defer c.CloseIdleConnections()
			cfg := worker.Config{
				Client: c, ID: id, Concurrency: concurrency, Workloads: wls,
				WorkDir: workDir, KeepWorkDirs: keepDirs, Grace: grace, Logger: log,
				TreeSlots: treeSlots, AllowInputHosts: allowHosts, MaxInputBytes: maxInput, PassEnv: passEnv,
				Deadline: deadline,
			}
			if treeSlots > 0 {
				cfg.Trees = scimeshv1connect.NewWorkerClient(&http.Client{}, coordinator, connect.WithInterceptors(rpc.Bearer(token)))
			}
			w, err := worker.New(cfg)
			if err != nil {
				return err
			}
			defer releaseOnSignal(w)()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return w.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.String("coordinator", config.DefaultCoordinator, "the coordinator's URL (env SCIMESH_COORDINATOR)")
	f.String("token", "", "the worker token (env SCIMESH_TOKEN, else WORKER_AUTH_TOKEN); prefer the environment, flags show in ps")
	f.String("id", "", "this worker's ID, 1-128 of [A-Za-z0-9._:-] (env SCIMESH_WORKER_ID; default HOSTNAME-PID)")
	f.IntVar(&concurrency, "concurrency", 1, "how many tasks run at once")
	f.StringArrayVar(&workloads, "workload", nil, "NAME=COMMAND runs COMMAND with /bin/sh -c for tasks of NAME; NAME alone turns on a built-in (repeat the flag)")
	f.StringArrayVar(&versions, "workload-version", nil, "NAME=VERSION: what this worker runs for NAME, which the coordinator caches outputs by "+
		"(default: a hash of the command and of its program's file; repeat the flag)")
	f.StringArrayVar(&persistent, "persistent", nil, "run the --workload NAME's command once per slot and hand it chunk after chunk over stdin and stdout "+
		"(docs/workload-protocol.md), for a workload that loads something slow once (repeat the flag)")
	f.String("work-dir", config.DefaultWorkDir, "where commands run, in WORK_DIR/TASK_ID/ATTEMPT/, each beside a copy of its chunk (room for the chunks of every running task; env SCIMESH_WORK_DIR)")
	f.DurationVar(&grace, "grace", worker.DefaultGrace, "on SIGTERM or SIGINT, how long running tasks may finish before they are killed")
	f.IntVar(&treeSlots, "tree-concurrency", 0, "how many tree tasks (scimesh.v1 Worker.Poll) run at once beside the chunk tasks; 0 runs none")
	f.BoolVar(&keepDirs, "keep-work-dirs", false, "keep each attempt's work directory, its chunk's copy (.scimesh-input) included, when it ends, for debugging (leftovers are then not removed at start)")
	f.StringArrayVar(&allowHosts, "allow-input-host", nil, "where hosted chunks may be fetched from: a host name, *.domain or a CIDR such as 10.0.0.0/8 (repeat the flag); default any host but loopback and link-local addresses")
	f.Int64Var(&maxInput, "max-input-bytes", worker.DefaultMaxInputBytes, "the most a chunk may be, in bytes: a task that names a larger size fails before its chunk is downloaded, and a chunk of unknown size is cut off past it")
	config.AddDeadlineFlags(f)
	f.StringArrayVar(&passEnv, "pass-env", nil, "a variable of the worker's environment that commands see too (repeat the flag); they always see PATH, HOME, LANG, LC_*, TZ and TMPDIR")
	return cmd
}

// releaseSignal makes a worker release its running tasks at once and exit
// 0: the warning that its allocation ends (Slurm's --signal, a spot
// instance's notice turned into a kill -USR1).
const releaseSignal = syscall.SIGUSR1

// releaseOnSignal calls w.Release when the process gets releaseSignal,
// until the returned function is called.
func releaseOnSignal(w *worker.Worker) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, releaseSignal)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
			w.Release()
		case <-done:
		}
	})
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}
