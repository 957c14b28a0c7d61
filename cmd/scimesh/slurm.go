package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/worker"
)

// slurmOptions are the settings of `scimesh slurm submit`.
type slurmOptions struct {
	coordinator   string
	workloads     []string
	jobs          int
	walltime      time.Duration // --time
	timeText      string        // --time as given, for #SBATCH
	partition     string
	cpusPerTask   int
	concurrency   int
	sbatchArgs    []string
	workerArgs    []string
	tokenFile     string // absolute; empty: SCIMESH_TOKEN through sbatch's environment
	binary        string // absolute
	workDir       string // empty: a new directory of mktemp -d under $SLURM_TMPDIR, else $TMPDIR
	jobName       string
	releaseBefore time.Duration // before the walltime ends: the worker's deadline and Slurm's signal
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
			e, err := loadEnv()
			if err != nil {
				return err
			}
			o.coordinator = e.setting(cmd, "coordinator", "SCIMESH_COORDINATOR", "")
			if err := o.check(cmd); err != nil {
				return err
			}
			token := ""
			if o.tokenFile == "" {
				if token = e.get("SCIMESH_TOKEN"); token == "" {
					return errors.New("no worker token: give --token-file FILE (readable by you only) or set SCIMESH_TOKEN; a token never goes on a command line")
				}
			}
			script := o.script()
			if dryRun {
				_, err := fmt.Fprint(cmd.OutOrStdout(), script)
				return err
			}
			id, err := sbatch(script, o.sbatchArgs, token)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), id)
			return err
		},
	}
	f := cmd.Flags()
	f.String("coordinator", "", "the coordinator's URL as the compute nodes reach it (env SCIMESH_COORDINATOR)")
	f.StringArrayVar(&o.workloads, "workload", nil, "NAME=COMMAND or a built-in's NAME, as for scimesh worker (repeat the flag)")
	f.IntVar(&o.jobs, "jobs", 0, "how many Slurm jobs (workers) the array has")
	f.StringVar(&o.timeText, "time", "", "each job's walltime, [D-]HH:MM:SS")
	f.StringVar(&o.partition, "partition", "", "the Slurm partition (default: the cluster's)")
	f.IntVar(&o.cpusPerTask, "cpus-per-task", 0, "CPUs of each job (default: the cluster's)")
	f.IntVar(&o.concurrency, "concurrency", 0, "tasks each worker runs at once (default --cpus-per-task, else 1)")
	f.StringArrayVar(&o.sbatchArgs, "sbatch-arg", nil, "an argument for sbatch, such as --account=proj or --mem=4G (repeat the flag); it wins over the script's #SBATCH lines")
	f.StringArrayVar(&o.workerArgs, "worker-arg", nil, "an argument for each scimesh worker, such as --pass-env=OMP_NUM_THREADS (repeat the flag)")
	f.StringVar(&o.tokenFile, "token-file", "", "a file holding the worker token, readable by its owner only, on a file system the compute nodes share (default: SCIMESH_TOKEN, through sbatch's environment)")
	f.StringVar(&o.binary, "binary", "", "the scimesh binary the jobs run, as the compute nodes see it (default: this one)")
	f.StringVar(&o.workDir, "work-dir", "", "each worker's --work-dir, a directory of the user's own (default: a new one that mktemp -d makes on its node, under $SLURM_TMPDIR, else ${TMPDIR:-/tmp})")
	f.StringVar(&o.jobName, "job-name", "scimesh-worker", "the Slurm job's name")
	f.DurationVar(&o.releaseBefore, "release-before", 0, "how long before the walltime ends the workers release their tasks and exit (default a tenth of --time, 10s to 2m)")
	f.BoolVar(&dryRun, "dry-run", false, "print the batch script and submit nothing")
	return cmd
}

// check validates o and fills in its defaults.
func (o *slurmOptions) check(cmd *cobra.Command) error {
	if o.coordinator == "" {
		return errors.New("no coordinator: give --coordinator URL (as the compute nodes reach it) or set SCIMESH_COORDINATOR")
	}
	if u, err := url.Parse(o.coordinator); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--coordinator %q: give an http:// or https:// URL", o.coordinator)
	}
	if _, err := parseWorkloads(o.workloads); err != nil {
		return err
	}
	if o.jobs < 1 {
		return fmt.Errorf("--jobs %d: give how many workers to run, at least 1", o.jobs)
	}
	if !cmd.Flags().Changed("time") {
		return errors.New("no walltime: give --time HH:MM:SS, each job's time limit")
	}
	d, err := parseWalltime(o.timeText)
	if err != nil {
		return err
	}
	o.walltime = d
	if o.releaseBefore == 0 {
		o.releaseBefore = min(max(d/10, 10*time.Second), 2*time.Minute)
	}
	o.releaseBefore = o.releaseBefore.Round(time.Second)
	if o.releaseBefore < time.Second || o.releaseBefore > d-worker.DefaultDeadlineLease {
		return fmt.Errorf("--release-before %v: give at least 1s, and leave more than %v of the %v walltime to work in", o.releaseBefore, worker.DefaultDeadlineLease, d)
	}
	if err := checkWorkerArgs(o.workerArgs); err != nil {
		return err
	}
	if cmd.Flags().Changed("cpus-per-task") && o.cpusPerTask < 1 {
		return fmt.Errorf("--cpus-per-task %d: give at least 1", o.cpusPerTask)
	}
	switch {
	case cmd.Flags().Changed("concurrency") && o.concurrency < 1:
		return fmt.Errorf("--concurrency %d: give at least 1", o.concurrency)
	case o.concurrency == 0 && o.cpusPerTask > 0:
		o.concurrency = o.cpusPerTask
	case o.concurrency == 0:
		o.concurrency = 1
	}
	if o.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this scimesh binary's path (give --binary): %w", err)
		}
		o.binary = exe
	}
	if o.binary, err = filepath.Abs(o.binary); err != nil {
		return fmt.Errorf("--binary: %w", err)
	}
	if o.tokenFile != "" {
		if o.tokenFile, err = filepath.Abs(o.tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if err := checkTokenFile(o.tokenFile); err != nil {
			return err
		}
	}
	return o.checkScriptText()
}

// checkScriptText refuses control characters in every value the batch
// script holds: a line break in an #SBATCH line would start a line of the
// caller's making (another #SBATCH option, or a command), and none has a
// use for one.
func (o *slurmOptions) checkScriptText() error {
	values := []struct {
		flag string
		v    []string
	}{
		{"--job-name", []string{o.jobName}},
		{"--partition", []string{o.partition}},
		{"--coordinator", []string{o.coordinator}},
		{"--work-dir", []string{o.workDir}},
		{"--binary", []string{o.binary}},
		{"--token-file", []string{o.tokenFile}},
		{"--workload", o.workloads},
		{"--worker-arg", o.workerArgs},
	}
	for _, f := range values {
		for _, v := range f.v {
			if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
				return fmt.Errorf("%s %q holds a control character (%U): the value goes into the batch script, where a line break would start a line of its own; give it on one line, without control characters (a command of several lines can go in a script file)", f.flag, v, []rune(v[i:])[0])
			}
		}
	}
	return nil
}

// checkTokenFile checks that path holds a token only its owner may read.
func checkTokenFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("--token-file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("--token-file %s may be read by others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if strings.TrimSpace(string(data)) == "" {
		return fmt.Errorf("--token-file %s is empty", path)
	}
	return nil
}

var walltimeRe = regexp.MustCompile(`^(?:(\d+)-)?(\d+):([0-5]\d):([0-5]\d)$`)

// parseWalltime parses Slurm's [D-]HH:MM:SS. Slurm counts time limits in
// whole minutes, so a walltime must be one at least.
func parseWalltime(s string) (time.Duration, error) {
	m := walltimeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("--time %q: give the walltime as HH:MM:SS or D-HH:MM:SS, such as 04:00:00", s)
	}
	var n [4]int
	for i, v := range m[1:] {
		if v != "" {
			n[i], _ = strconv.Atoi(v)
		}
	}
	d := time.Duration(n[0])*24*time.Hour + time.Duration(n[1])*time.Hour + time.Duration(n[2])*time.Minute + time.Duration(n[3])*time.Second
	if d < time.Minute {
		return 0, fmt.Errorf("--time %q: Slurm counts walltimes in minutes; give at least 00:01:00", s)
	}
	return d, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// script is the batch script. It execs the worker, which then is the
// batch shell that Slurm's --signal=B:… reaches.
func (o *slurmOptions) script() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("#!/bin/bash")
	line("#SBATCH --job-name=%s", shellQuote(o.jobName))
	line("#SBATCH --array=0-%d", o.jobs-1)
	line("#SBATCH --time=%s", o.timeText)
	line("#SBATCH --signal=B:USR1@%d", int(o.releaseBefore.Seconds()))
	if o.partition != "" {
		line("#SBATCH --partition=%s", shellQuote(o.partition))
	}
	if o.cpusPerTask > 0 {
		line("#SBATCH --cpus-per-task=%d", o.cpusPerTask)
	}
	line("#")
	line("# Written by scimesh slurm submit. Each job of the array runs one scimesh")
	line("# worker. It claims while at least a lease is left before --max-runtime")
	line("# (the walltime less %v), and releases its running tasks, pending again", o.releaseBefore)
	line("# at once without counting the attempt, at that moment or when Slurm sends")
	line("# SIGUSR1 (--signal, which may come up to a minute early), then exits 0.")
	line("set -eu")
	if o.tokenFile != "" {
		line("# The worker token is read from a file only its owner may read, so that")
		line("# neither this script nor the job's stored environment holds it.")
		line("SCIMESH_TOKEN=$(< %s)", shellQuote(o.tokenFile))
		line("export SCIMESH_TOKEN")
	} else {
		line("# The worker token comes in the job's environment, from sbatch's.")
		line(`if [ -z "${SCIMESH_TOKEN:-}" ]; then`)
		line(`	echo "scimesh: no SCIMESH_TOKEN in the job's environment (did an --export leave it out?)" >&2`)
		line("	exit 1")
		line("fi")
	}
	line(`node=${SLURMD_NODENAME:-$(hostname -s)}`)
	workDir := `"$work_dir"`
	if o.workDir != "" {
		workDir = shellQuote(o.workDir)
	} else {
		line("# The worker's directory is a new one of this job's own, which no other")
		line("# user of the node can have made first or write to: under the job's")
		line("# private $SLURM_TMPDIR when the cluster gives one, else under $TMPDIR.")
		line(`work_dir=$(mktemp -d "${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/scimesh-work.XXXXXXXX")`)
	}
	runtime := o.walltime - o.releaseBefore
	line("exec %s worker \\", shellQuote(o.binary))
	line("	--coordinator %s \\", shellQuote(o.coordinator))
	line(`	--id "${node}-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" \`)
	line("	--concurrency %d \\", o.concurrency)
	line("	--max-runtime %s \\", runtime)
	line("	--work-dir %s \\", workDir)
	for _, a := range o.workerArgs {
		line("	%s \\", shellQuote(a))
	}
	for i, w := range o.workloads {
		end := " \\"
		if i == len(o.workloads)-1 {
			end = ""
		}
		line("	--workload %s%s", shellQuote(w), end)
	}
	return b.String()
}

// keptFromSbatch are the variables of the submitting environment that
// sbatch, which hands the job the environment it is given, is not given.
var keptFromSbatch = []string{"SCIMESH_TOKEN", "CLIENT_AUTH_TOKEN", "PEER_AUTH_TOKEN", "WORKER_AUTH_TOKEN", "DATABASE_URL",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// sbatch submits script with sbatch and returns the job ID. A token is
// handed to it in its environment (never on its command line), which it
// passes on to the job; without one, SCIMESH_TOKEN is kept from it.
func sbatch(script string, args []string, token string) (string, error) {
	path, err := exec.LookPath("sbatch")
	if err != nil {
		return "", errors.New("sbatch is not on PATH: run scimesh slurm submit where Slurm's commands are (a login node), or give --dry-run to see the batch script")
	}
	cmd := exec.Command(path, append([]string{"--parsable"}, args...)...)
	// sbatch hands the job the environment it was given, and slurmctld
	// keeps it: the other roles' tokens, the database's and the blob
	// store's credentials stay out of it.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keptFromSbatch, k)
	})
	if token != "" {
		env = append(env, "SCIMESH_TOKEN="+token)
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("sbatch: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(stdout.String()), ";") // JOBID[;CLUSTER]
	if id == "" {
		return "", fmt.Errorf("sbatch printed no job ID: %s", strings.TrimSpace(stderr.String()))
	}
	return id, nil
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
