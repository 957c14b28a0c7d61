package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseWalltime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  string // a piece of the error, when it is refused
	}{
		{"04:00:00", 4 * time.Hour, ""},
		{"1-02:03:04", 26*time.Hour + 3*time.Minute + 4*time.Second, ""},
		{"00:01:00", time.Minute, ""},
		{"00:00:59", 0, "give at least 00:01:00"},
		{"4:00", 0, "HH:MM:SS"},
		{"04:60:00", 0, "HH:MM:SS"},
		{"x", 0, "HH:MM:SS"},
	} {
		got, err := ParseWalltime(c.in)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("ParseWalltime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("ParseWalltime(%q) = %v, %v; want an error saying %q", c.in, got, err, c.bad)
		}
	}
}

// TestShellQuote: a POSIX shell reads each quoted string back as it was.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"plain", "", "two words", "it's", `"$HOME" $(id) ; rm -rf /`, "a\\b", "é ü", "--flag=x,y"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh reads ShellQuote(%q) = %s back as %q (%v)", s, ShellQuote(s), out, err)
		}
	}
	if got := ShellQuote("tanimoto"); got != "tanimoto" {
		t.Errorf("ShellQuote(tanimoto) = %s, want it unquoted", got)
	}
}

func array() *Array {
	return &Array{Coordinator: "http://coord:8080", Workloads: []string{"tanimoto", "rank=python3 'my score.py'"}, Jobs: 4,
		Walltime: time.Hour, TimeText: "01:00:00", Partition: "short", CPUsPerTask: 8, Concurrency: 8,
		WorkerArgs: []string{"--pass-env=OMP_NUM_THREADS"}, Binary: "/opt/scimesh/bin/scimesh", JobName: "scimesh-worker",
		ReleaseBefore: time.Minute}
}

func TestScript(t *testing.T) {
	t.Parallel()
	s := array().Script()
	for _, want := range []string{
		"#!/bin/bash\n", "#SBATCH --job-name=scimesh-worker\n", "#SBATCH --array=0-3\n", "#SBATCH --time=01:00:00\n",
		"#SBATCH --signal=B:USR1@60\n", "#SBATCH --partition=short\n", "#SBATCH --cpus-per-task=8\n",
		`if [ -z "${SCIMESH_TOKEN:-}" ]; then`, "exec /opt/scimesh/bin/scimesh worker \\\n", "--coordinator http://coord:8080 \\\n",
		"--concurrency 8 \\\n", "--max-runtime 59m0s \\\n", `--work-dir "$work_dir" \`, "--pass-env=OMP_NUM_THREADS \\\n",
		"--workload tanimoto \\\n", `--workload 'rank=python3 '\''my score.py'\'''` + "\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q:\n%s", want, s)
		}
	}
	a := array()
	a.TokenFile, a.WorkDir = "/home/ada/.scimesh token", "/scratch/ada"
	s = a.Script()
	for _, want := range []string{"SCIMESH_TOKEN=$(< '/home/ada/.scimesh token')\n", "--work-dir /scratch/ada \\\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("with a token file and a work directory, the script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "mktemp") {
		t.Errorf("with a work directory, the script still makes one:\n%s", s)
	}
	if out, err := exec.Command("/bin/bash", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	if err := array().CheckText(); err != nil {
		t.Fatalf("CheckText of a plain array: %v", err)
	}
	for name, change := range map[string]func(a *Array){
		"--job-name": func(a *Array) { a.JobName = "x\n#SBATCH --mem=1T" },
		"--workload": func(a *Array) { a.Workloads = append(a.Workloads, "a=b\rc") },
		"--binary":   func(a *Array) { a.Binary = "/bin/x\x00" },
	} {
		a := array()
		change(a)
		if err := a.CheckText(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("a control character in %s: %v, want an error naming it", name, err)
		}
	}
}

func TestCheckTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := CheckTokenFile(write("ok", "secret\n", 0o600)); err != nil {
		t.Errorf("a token file of mode 0600: %v", err)
	}
	for path, want := range map[string]string{
		write("open", "secret\n", 0o644): "chmod 600",
		write("empty", " \n", 0o600):     "is empty",
		dir:                              "not a regular file",
		filepath.Join(dir, "missing"):    "no such file",
	} {
		if err := CheckTokenFile(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckTokenFile(%s): %v, want an error saying %q", path, err, want)
		}
	}
}
