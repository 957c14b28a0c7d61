package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/demo"
	"github.com/scimesh/scimesh/internal/slurmtest"
)

// TestSlurmSubmitDryRun checks the batch script `scimesh slurm submit
// --dry-run` prints, that no token is in it, and the errors of bad input,
// which submit nothing.
func TestSlurmSubmitDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "s3cret-worker-token-0123456789"
	env := []string{"SCIMESH_TOKEN=" + secret}
	args := []string{"slurm", "submit", "--coordinator", "http://10.1.2.3:8080", "--workload", "tanimoto",
		"--workload", "dock=/opt/dock/score.sh --fast", "--jobs", "4", "--time", "02:00:00",
		"--partition", "short", "--cpus-per-task", "8", "--dry-run"}
	script, err := runStdout(t, dir, env, args...)
	if err != nil {
		t.Fatalf("--dry-run: %v\n%s", err, script)
	}
	for _, want := range []string{"#!/bin/bash\n", "#SBATCH --array=0-3\n", "#SBATCH --time=02:00:00\n",
		"#SBATCH --signal=B:USR1@120\n", "#SBATCH --partition=short\n", "#SBATCH --cpus-per-task=8\n",
		"exec " + scimesh + " worker", "--max-runtime 1h58m0s", "--concurrency 8", "--coordinator http://10.1.2.3:8080",
		`--id "${node}-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"`, "--workload tanimoto", "--workload 'dock=/opt/dock/score.sh --fast'",
		`--work-dir "$work_dir"`} {
		if !strings.Contains(script, want) {
			t.Errorf("the script lacks %q:\n%s", want, script)
		}
	}
	// The default work directory is a new one of the job's own, made by
	// mktemp -d under $SLURM_TMPDIR when the cluster gives one, else under
	// $TMPDIR: the script's own line, run by bash, makes it so.
	mktemp := regexp.MustCompile(`(?m)^work_dir=.*$`).FindString(script)
	for _, slurmTmp := range []string{t.TempDir(), ""} {
		tmp := t.TempDir()
		sh := exec.Command("bash", "-c", "set -eu; "+mktemp+`; echo "$work_dir"; stat -c '%a %u' "$work_dir"`)
		sh.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}
		parent := tmp
		if slurmTmp != "" {
			sh.Env = append(sh.Env, "SLURM_TMPDIR="+slurmTmp)
			parent = slurmTmp
		}
		out, err := sh.Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 || filepath.Dir(lines[0]) != parent || lines[1] != fmt.Sprintf("700 %d", os.Geteuid()) {
			t.Errorf("the script's line %q with SLURM_TMPDIR %q and TMPDIR %q: %v, %q; want a new directory of mode 700 in %s", mktemp, slurmTmp, tmp, err, out, parent)
		}
	}
	if strings.Contains(script, secret) {
		t.Errorf("the script holds the token:\n%s", script)
	}

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withFile := append(args[:len(args)-1:len(args)-1], "--token-file", tokenFile, "--dry-run")
	if msg, err := run(t, dir, nil, withFile...); err == nil || !strings.Contains(msg, "chmod 600") {
		t.Errorf("a token file others may read: %v\n%s", err, msg)
	}
	if err := os.Chmod(tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	script, err = runStdout(t, dir, nil, withFile...)
	if err != nil || !strings.Contains(script, "SCIMESH_TOKEN=$(< "+tokenFile+")") || strings.Contains(script, secret) {
		t.Errorf("--token-file: %v\n%s", err, script)
	}

	// Bad input, with a fake sbatch on PATH that would show it ran.
	bin := t.TempDir()
	ran := filepath.Join(dir, "sbatch-ran")
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte("#!/bin/sh\ntouch "+ran+"\necho 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fakePath := "PATH=" + bin + ":" + os.Getenv("PATH")
	base := []string{"slurm", "submit", "--coordinator", "http://10.1.2.3:8080"}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no workload", env, []string{"--jobs", "2", "--time", "01:00:00"}, "no workload"},
		{"no jobs", env, []string{"--workload", "tanimoto", "--jobs", "0", "--time", "01:00:00"}, "--jobs 0"},
		{"bad time", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "1h"}, "HH:MM:SS"},
		{"under a minute", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "00:00:30"}, "at least 00:01:00"},
		{"no time", env, []string{"--workload", "tanimoto", "--jobs", "2"}, "--time"},
		{"bad workload", env, []string{"--workload", "=x", "--jobs", "2", "--time", "01:00:00"}, "workload"},
		{"no token", nil, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00"}, "SCIMESH_TOKEN"},
		{"unknown worker flag", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--worker-arg=--bogus"}, "--bogus"},
		{"worker flag the script sets", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--worker-arg=--max-runtime=1h"}, "--max-runtime"},
		{"line break in the job name", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--job-name", "w\n#SBATCH --uid=0"}, `--job-name "w\n#SBATCH --uid=0" holds a control character (U+000A)`},
		{"line break in the job name, dry run", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--job-name", "w\nid", "--dry-run"}, `--job-name "w\nid" holds a control character`},
		{"carriage return in the partition", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--partition", "short\r"}, `--partition "short\r" holds a control character (U+000D)`},
		{"line break in a workload", env, []string{"--workload", "x=a\nb", "--jobs", "2", "--time", "01:00:00"}, `--workload "x=a\nb" holds a control character`},
		{"tab in the work directory", env, []string{"--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00", "--work-dir", "/tmp/a\tb"}, `--work-dir "/tmp/a\tb" holds a control character`},
	} {
		msg, err := run(t, dir, append([]string{fakePath}, c.env...), append(base, c.args...)...)
		if err == nil || !strings.Contains(msg, c.want) || strings.Contains(msg, "#!/bin/bash") {
			t.Errorf("%s: %v\n%s; want an error naming %q, and no script", c.name, err, msg, c.want)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("sbatch ran for bad input")
	}
	// A real submission to the fake sbatch: of the credentials in the
	// environment, only the worker token reaches it (and so the job).
	envFile := filepath.Join(dir, "sbatch-env")
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte("#!/bin/sh\nenv >"+envFile+"\necho 42\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	creds := []string{"CLIENT_AUTH_TOKEN=client-secret", "PEER_AUTH_TOKEN=peer-secret", "DATABASE_URL=postgres://u:db-secret@h/d",
		"AWS_SECRET_ACCESS_KEY=aws-secret", "AWS_SESSION_TOKEN=aws-session"}
	out, err := runStdout(t, dir, append(append([]string{fakePath}, env...), creds...), append(base, "--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00")...)
	if err != nil || strings.TrimSpace(out) != "42" {
		t.Fatalf("submit to the fake sbatch: %v %q", err, out)
	}
	seen, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"client-secret", "peer-secret", "db-secret", "aws-secret", "aws-session"} {
		if strings.Contains(string(seen), s) {
			t.Errorf("sbatch was given %s in its environment", s)
		}
	}
	if !strings.Contains(string(seen), "SCIMESH_TOKEN="+secret) {
		t.Errorf("sbatch was not given the worker token:\n%s", seen)
	}

	// No sbatch at all: the PATH of run has none but the system's, so
	// give an empty one.
	msg, err := run(t, dir, append([]string{"PATH=" + t.TempDir()}, env...), append(base, "--workload", "tanimoto", "--jobs", "2", "--time", "01:00:00")...)
	if err == nil || !strings.Contains(msg, "sbatch is not on PATH") {
		t.Errorf("without sbatch: %v\n%s", err, msg)
	}
}

// TestSlurmSubmitRunsWorkers starts a real single-node Slurm cluster and
// a coordinator, and `scimesh slurm submit --jobs 2` runs two workers as
// the jobs of one array: they complete a tanimoto job with the exact
// result.
func TestSlurmSubmitRunsWorkers(t *testing.T) {
	t.Parallel()
	cluster := slurmtest.Start(t)
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "fps.csv")
	query, err := demo.WriteFingerprints(table, demo.Data{Rows: 20000, Bits: 512, Density: 0.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]string{"query": query})
	want, err := demo.DirectTopK(context.Background(), table, params, 10)
	if err != nil {
		t.Fatal(err)
	}
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "tanimoto", "--top-k", "10",
		"--chunk-rows", "1000", "--param", "query="+query)
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)

	began := time.Now()
	out, err := runStdout(t, dir, []string{cluster.Env(), "SCIMESH_TOKEN=wtok"}, "slurm", "submit", "--coordinator", p.URL,
		"--workload", "tanimoto", "--jobs", "2", "--time", "00:05:00")
	if err != nil {
		t.Fatalf("slurm submit: %v\n%s", err, out)
	}
	array := strings.TrimSpace(out)
	if !regexp.MustCompile(`^\d+$`).MatchString(array) {
		t.Fatalf("slurm submit printed %q, want a job ID", out)
	}
	waitCompleted(t, p.URL, jobID, 90*time.Second)
	t.Logf("the job completed %v after slurm submit", time.Since(began).Round(time.Millisecond))
	var got string
	workerGetText(t, p.URL+"/jobs/"+jobID+"/result", &got)
	if got != string(want) {
		t.Fatalf("result of the Slurm workers:\n%s\nwant:\n%s", got, want)
	}
	owner := regexp.MustCompile(`^` + regexp.QuoteMeta(cluster.Node) + `-` + array + `_[01]$`)
	for i := range 20 {
		var tk taskOut
		call(t, "GET", fmt.Sprintf("%s/tasks/%s-%d", p.URL, jobID, i), "ctok", nil, &tk)
		if !owner.MatchString(tk.LeaseOwner) {
			t.Errorf("chunk %d was completed by %q, not by a worker of array %s", i, tk.LeaseOwner, array)
		}
	}
	// Both jobs of the array ran a worker (sbatch writes their output in
	// the directory it ran in).
	for i := range 2 {
		log := filepath.Join(dir, fmt.Sprintf("slurm-%s_%d.out", array, i))
		workerWaitFor(t, 30*time.Second, log+" to show a worker started", func() bool {
			data, _ := os.ReadFile(log)
			return strings.Contains(string(data), "worker started")
		})
	}
}

// TestSlurmShortWalltimeReleases runs a worker as a Slurm job of one
// minute, whose task would run for ten: the worker releases the task before
// Slurm ends the job (Slurm's SIGUSR1, or its own --max-runtime), and exits
// 0; a plain worker started after completes the job with the exact result.
// The job allows one attempt: the release did not count.
func TestSlurmShortWalltimeReleases(t *testing.T) {
	t.Parallel()
	cluster := slurmtest.Start(t)
	dir := t.TempDir()
	p := serveSQLite(t, dir)
	table := filepath.Join(dir, "table.csv")
	want := writeScoredTable(t, table, 300, 10)
	jobID, err := runStdout(t, dir, clientEnv(p.URL), "submit", table, "--workload", "copy", "--top-k", "10",
		"--chunk-rows", "300", "--lease-seconds", "30", "--max-attempts", "1")
	if err != nil {
		t.Fatalf("submit: %v %s", err, jobID)
	}
	jobID = strings.TrimSpace(jobID)

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("wtok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	out, err := runStdout(t, dir, []string{cluster.Env()}, "slurm", "submit", "--coordinator", p.URL, "--token-file", tokenFile,
		"--workload", copyWorkload("sleep 600; "), "--jobs", "1", "--time", "00:01:00")
	if err != nil {
		t.Fatalf("slurm submit: %v\n%s", err, out)
	}
	array := strings.TrimSpace(out)
	task := func() (tk taskOut) {
		call(t, "GET", p.URL+"/tasks/"+jobID+"-0", "ctok", nil, &tk)
		return tk
	}
	workerWaitFor(t, 30*time.Second, "the Slurm worker to lease the task", func() bool {
		return strings.HasSuffix(task().LeaseOwner, "-"+array+"_0")
	})
	t.Logf("leased %v after slurm submit", time.Since(began).Round(time.Millisecond))
	workerWaitFor(t, 80*time.Second, "the Slurm worker to release the task", func() bool {
		return task().State == "pending"
	})
	released := time.Since(began)
	tk := task()
	if tk.Attempt != 1 || !strings.Contains(tk.Error, "released the task") {
		t.Fatalf("the task after the walltime: %+v; want pending after a release", tk)
	}
	t.Logf("released %v after slurm submit: %s", released.Round(time.Millisecond), tk.Error)

	// The job ends by itself, before its time limit: completed, exit 0.
	var state string
	workerWaitFor(t, 30*time.Second, "the Slurm job to end", func() bool {
		out, _ := cluster.Command("scontrol", "show", "job", array).CombinedOutput()
		state = string(out)
		return strings.Contains(state, "JobState=COMPLETED") || strings.Contains(state, "JobState=TIMEOUT") ||
			strings.Contains(state, "JobState=FAILED") || strings.Contains(state, "JobState=CANCELLED")
	})
	if !strings.Contains(state, "JobState=COMPLETED") || !strings.Contains(state, "ExitCode=0:0") {
		t.Errorf("the Slurm job did not end by itself with 0:\n%s", state)
	}
	logs, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("slurm-%s_0.out", array)))
	if !strings.Contains(string(logs), "worker stopped") || strings.Contains(string(logs), "TIME LIMIT") {
		t.Errorf("the Slurm worker's output:\n%s", logs)
	}

	start(t, dir, workerEnv(p.URL), "worker", "--id", "plain", "--work-dir", filepath.Join(dir, "work"), "--workload", copyWorkload(""))
	waitCompleted(t, p.URL, jobID, 30*time.Second)
	if tk := task(); tk.Attempt != 2 || tk.LeaseOwner != "plain" {
		t.Errorf("the task at the end: %+v; want completed by plain at attempt 2", tk)
	}
	var got string
	workerGetText(t, p.URL+"/jobs/"+jobID+"/result", &got)
	if got != want {
		t.Fatalf("result after the release:\n%s\nwant:\n%s", got, want)
	}
}
