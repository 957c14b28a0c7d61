package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/config"
	"github.com/scimesh/scimesh/internal/slurm"
)

// slurmOptions are the settings of `scimesh slurm submit`.
type slurmOptions struct {
	slurm.Array
	sbatchArgs []string
}

func newSlurmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slurm",
		Short: "Run workers on a Slurm cluster",
	}
	cmd.AddCommand(newSlurmSubmitCmd())
	return cmd
}

func newSlurmSubmitCmd() *cobra.Command {
	var (
		o      slurmOptions
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "submit --coordinator URL --workload SPEC… --jobs N --time HH:MM:SS [flags]",
		Short: "Submit workers as one Slurm job array",
		Long: `Submit one sbatch job array of --jobs Slurm jobs, each running one scimesh
worker with the given workloads (--workload as for scimesh worker). Each
worker's ID is NODE-ARRAYJOBID_TASKID. It stops claiming when less than a
lease is left before the walltime's end minus a margin (--max-runtime), and
releases what it runs at that moment, or when Slurm sends SIGUSR1 (the
script asks for it with #SBATCH --signal=B:USR1@MARGIN; Slurm may send it up
to a minute early), whichever comes first: released tasks are pending again
at once, their attempt not counted. The margin is a tenth of the walltime,
at least 10 s and at most 2 min (--release-before changes it).

The worker token comes from --token-file (a file only its owner may read,
which the batch script reads when it starts, so the token is stored nowhere
by Slurm) or else from SCIMESH_TOKEN, which sbatch hands to the job in its
environment. It never appears on a command line or in the script.

It prints the Slurm job ID; with --dry-run, the batch script, and submits
nothing.`,
		Example: `  SCIMESH_TOKEN=… scimesh slurm submit --coordinator http://coord:8080 \
    --workload tanimoto --jobs 100 --time 04:00:00 --cpus-per-task 8 --partition short`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := config.Load(cmd.Flags())
			if err != nil {
				return err
			}
			o.Coordinator = e.Setting("coordinator", "SCIMESH_COORDINATOR", "")
			if err := o.check(cmd); err != nil {
				return err
			}
			token := ""
			if o.TokenFile == "" {
				if token = e.Get("SCIMESH_TOKEN"); token == "" {
					return errors.New("no worker token: give --token-file FILE (readable by you only) or set SCIMESH_TOKEN; a token never goes on a command line")
				}
			}
			script := o.Script()
			if dryRun {
				_, err := fmt.Fprint(cmd.OutOrStdout(), script)
				return err
			}
			id, err := slurm.Submit(script, o.sbatchArgs, token)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), id)
			return err
		},
	}
	f := cmd.Flags()
	f.String("coordinator", "", "the coordinator's URL as the compute nodes reach it (env SCIMESH_COORDINATOR)")
	f.StringArrayVar(&o.Workloads, "workload", nil, "NAME=COMMAND or a built-in's NAME, as for scimesh worker (repeat the flag)")
	f.IntVar(&o.Jobs, "jobs", 0, "how many Slurm jobs (workers) the array has")
	f.StringVar(&o.TimeText, "time", "", "each job's walltime, [D-]HH:MM:SS")
	f.StringVar(&o.Partition, "partition", "", "the Slurm partition (default: the cluster's)")
	f.IntVar(&o.CPUsPerTask, "cpus-per-task", 0, "CPUs of each job (default: the cluster's)")
	f.IntVar(&o.Concurrency, "concurrency", 0, "tasks each worker runs at once (default --cpus-per-task, else 1)")
	f.StringArrayVar(&o.sbatchArgs, "sbatch-arg", nil, "an argument for sbatch, such as --account=proj or --mem=4G (repeat the flag); it wins over the script's #SBATCH lines")
	f.StringArrayVar(&o.WorkerArgs, "worker-arg", nil, "an argument for each scimesh worker, such as --pass-env=OMP_NUM_THREADS (repeat the flag)")
	f.StringVar(&o.TokenFile, "token-file", "", "a file holding the worker token, readable by its owner only, on a file system the compute nodes share (default: SCIMESH_TOKEN, through sbatch's environment)")
	f.StringVar(&o.Binary, "binary", "", "the scimesh binary the jobs run, as the compute nodes see it (default: this one)")
	f.StringVar(&o.WorkDir, "work-dir", "", "each worker's --work-dir, a directory of the user's own (default: a new one that mktemp -d makes on its node, under $SLURM_TMPDIR, else ${TMPDIR:-/tmp})")
	f.StringVar(&o.JobName, "job-name", "scimesh-worker", "the Slurm job's name")
	f.DurationVar(&o.ReleaseBefore, "release-before", 0, "how long before the walltime ends the workers release their tasks and exit (default a tenth of --time, 10s to 2m)")
	f.BoolVar(&dryRun, "dry-run", false, "print the batch script and submit nothing")
	return cmd
}

// check validates o and fills in its defaults.
func (o *slurmOptions) check(cmd *cobra.Command) error {
	if err := o.Complete(cmd.Flags().Changed); err != nil {
		return err
	}
	return checkWorkerArgs(o.WorkerArgs)
}

// scriptSets are the worker flags the batch script sets itself, which a
// --worker-arg must not set again (the last would win over the script's).
var scriptSets = []string{"coordinator", "token", "id", "concurrency", "max-runtime", "until", "work-dir", "workload"}

// checkWorkerArgs refuses --worker-arg values that scimesh worker would
// refuse, or that set what the script sets, before anything is submitted.
func checkWorkerArgs(args []string) error {
	f := newWorkerCmd().Flags()
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("--worker-arg %s: %w (see scimesh worker --help)", strings.Join(args, " "), err)
	}
	for _, name := range scriptSets {
		if f.Changed(name) {
			return fmt.Errorf("--worker-arg sets --%s, which scimesh slurm submit sets itself: use its own flag", name)
		}
	}
	if f.NArg() > 0 {
		return fmt.Errorf("--worker-arg %q: scimesh worker takes flags only", f.Arg(0))
	}
	return nil
}
