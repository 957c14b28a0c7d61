// Package slurm writes the batch script that runs scimesh workers as one
// Slurm job array, and submits it with sbatch: the logic of
// `scimesh slurm submit`, whose command only turns flags into an Array.
package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Array is one job array of workers, as its batch script runs them.
type Array struct {
	Coordinator   string
	Workloads     []string // --workload values, as scimesh worker takes them
	Jobs          int
	Walltime      time.Duration // TimeText, parsed
	TimeText      string        // the walltime as given, for #SBATCH
	Partition     string
	CPUsPerTask   int
	Concurrency   int
	WorkerArgs    []string
	TokenFile     string // absolute; empty: SCIMESH_TOKEN through sbatch's environment
	Binary        string // absolute
	WorkDir       string // empty: a new directory of mktemp -d under $SLURM_TMPDIR, else $TMPDIR
	JobName       string
	ReleaseBefore time.Duration // before the walltime ends: the worker's deadline and Slurm's signal
}

// CheckText refuses control characters in every value the batch
// script holds: a line break in an #SBATCH line would start a line of the
// caller's making (another #SBATCH option, or a command), and none has a
// use for one.
func (a *Array) CheckText() error {
	values := []struct {
		flag string
		v    []string
	}{
		{"--job-name", []string{a.JobName}},
		{"--partition", []string{a.Partition}},
		{"--coordinator", []string{a.Coordinator}},
		{"--work-dir", []string{a.WorkDir}},
		{"--binary", []string{a.Binary}},
		{"--token-file", []string{a.TokenFile}},
		{"--workload", a.Workloads},
		{"--worker-arg", a.WorkerArgs},
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

// CheckTokenFile checks that path holds a token only its owner may read.
func CheckTokenFile(path string) error {
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

// ParseWalltime parses Slurm's [D-]HH:MM:SS. Slurm counts time limits in
// whole minutes, so a walltime must be one at least.
func ParseWalltime(s string) (time.Duration, error) {
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

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Script is the batch script. It execs the worker, which then is the
// batch shell that Slurm's --signal=B:… reaches.
func (a *Array) Script() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("#!/bin/bash")
	line("#SBATCH --job-name=%s", ShellQuote(a.JobName))
	line("#SBATCH --array=0-%d", a.Jobs-1)
	line("#SBATCH --time=%s", a.TimeText)
	line("#SBATCH --signal=B:USR1@%d", int(a.ReleaseBefore.Seconds()))
	if a.Partition != "" {
		line("#SBATCH --partition=%s", ShellQuote(a.Partition))
	}
	if a.CPUsPerTask > 0 {
		line("#SBATCH --cpus-per-task=%d", a.CPUsPerTask)
	}
	line("#")
	line("# Written by scimesh slurm submit. Each job of the array runs one scimesh")
	line("# worker. It claims while at least a lease is left before --max-runtime")
	line("# (the walltime less %v), and releases its running tasks, pending again", a.ReleaseBefore)
	line("# at once without counting the attempt, at that moment or when Slurm sends")
	line("# SIGUSR1 (--signal, which may come up to a minute early), then exits 0.")
	line("set -eu")
	if a.TokenFile != "" {
		line("# The worker token is read from a file only its owner may read, so that")
		line("# neither this script nor the job's stored environment holds it.")
		line("SCIMESH_TOKEN=$(< %s)", ShellQuote(a.TokenFile))
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
	if a.WorkDir != "" {
		workDir = ShellQuote(a.WorkDir)
	} else {
		line("# The worker's directory is a new one of this job's own, which no other")
		line("# user of the node can have made first or write to: under the job's")
		line("# private $SLURM_TMPDIR when the cluster gives one, else under $TMPDIR.")
		line(`work_dir=$(mktemp -d "${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/scimesh-work.XXXXXXXX")`)
	}
	runtime := a.Walltime - a.ReleaseBefore
	line("exec %s worker \\", ShellQuote(a.Binary))
	line("	--coordinator %s \\", ShellQuote(a.Coordinator))
	line(`	--id "${node}-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" \`)
	line("	--concurrency %d \\", a.Concurrency)
	line("	--max-runtime %s \\", runtime)
	line("	--work-dir %s \\", workDir)
	for _, a := range a.WorkerArgs {
		line("	%s \\", ShellQuote(a))
	}
	for i, w := range a.Workloads {
		end := " \\"
		if i == len(a.Workloads)-1 {
			end = ""
		}
		line("	--workload %s%s", ShellQuote(w), end)
	}
	return b.String()
}

// keptFromSbatch are the variables of the submitting environment that
// sbatch, which hands the job the environment it is given, is not given.
var keptFromSbatch = []string{"SCIMESH_TOKEN", "CLIENT_AUTH_TOKEN", "PEER_AUTH_TOKEN", "WORKER_AUTH_TOKEN", "DATABASE_URL",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// Submit submits script with sbatch and returns the job ID. A token is
// handed to it in its environment (never on its command line), which it
// passes on to the job; without one, SCIMESH_TOKEN is kept from it.
func Submit(script string, args []string, token string) (string, error) {
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
