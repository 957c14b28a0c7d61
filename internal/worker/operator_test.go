package worker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/worker"
)

// What a worker's operator controls: what commands see of the worker's
// environment, and the work directory's leftovers.

// TestEnvironmentAllowlist checks that a command sees only the allowed
// variables of the worker's environment, those PassEnv names, and the
// task's.
func TestEnvironmentAllowlist(t *testing.T) {
	t.Setenv("WORKER_AUTH_TOKEN", "secret-worker-token")
	t.Setenv("SOME_SECRET", "hush")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hush")
	t.Setenv("SCIMESH_TOKEN", "secret-token")
	t.Setenv("SOME_VAR", "passed")
	t.Setenv("LC_ALL", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	b := setup(t)
	out := t.TempDir()
	command := fmt.Sprintf(`cat >/dev/null; env > %s/env; echo id,score; echo a,1`, out)
	b.startWorker(worker.Config{PassEnv: []string{"SOME_VAR"}, Workloads: []worker.Workload{mustWorkload(t, "env="+command)}})
	j := b.job(client.JobRequest{Workload: "env"}, "id,value\na,1\n")
	b.waitJob(j.JobID, client.JobCompleted, 20*time.Second)

	data, err := os.ReadFile(filepath.Join(out, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{"SOME_VAR": "passed", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PATH": os.Getenv("PATH"), "SCIMESH_JOB_ID": j.JobID} {
		if env[k] != want {
			t.Errorf("the command sees %s=%q, want %q", k, env[k], want)
		}
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "TMPDIR": true, "SOME_VAR": true,
		"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true} // the last four, the shell's own
	for k, v := range env {
		if !allowed[k] && !strings.HasPrefix(k, "LC_") && !strings.HasPrefix(k, "SCIMESH_") {
			t.Errorf("the command sees %s=%q, which is not allowed", k, v)
		}
	}
	if v, ok := env["SCIMESH_TOKEN"]; ok {
		t.Errorf("the command sees the worker's SCIMESH_TOKEN=%q", v)
	}
}

// TestLeftoverWorkDirs checks that a worker removes at start the task
// directories that a killed worker left in its work directory, and
// nothing else — not when another live worker shares the directory.
func TestLeftoverWorkDirs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir, outside := t.TempDir(), t.TempDir()
	mk := func(path ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(append([]string{dir}, path...)...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, path), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("s0:01aa-0", "1", "sub")
	write("s0:01aa-0/1/sub/out.csv")
	mk("s0:01aa-0", "2")
	mk("s0:01aa-1") // an empty task directory
	mk("notes")     // no task ID
	mk("s0:01aa-2", "1")
	write("s0:01aa-2/README") // a task's name, but not only attempts in it
	write("s0:01aa-3")        // a file
	if err := os.MkdirAll(filepath.Join(outside, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "1", "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "s0:01aa-4")); err != nil {
		t.Fatal(err)
	}

	wl := []worker.Workload{mustWorkload(t, "score="+scoreCommand)}
	first := b.startWorker(worker.Config{WorkDir: dir, Workloads: wl})
	first.waitLog(t, "worker started", 10*time.Second)
	for path, want := range map[string]bool{
		"s0:01aa-0": false, "s0:01aa-1": false,
		"notes": true, "s0:01aa-2/README": true, "s0:01aa-3": true, "s0:01aa-4": true,
	} {
		if _, err := os.Lstat(filepath.Join(dir, path)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", path, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "1", "keep")); err != nil {
		t.Errorf("the sweep followed a symbolic link out of the work directory: %v", err)
	}

	// A second worker on the same directory while the first runs: the
	// first one's task directories are not leftovers.
	mk("s0:01bb-0", "1")
	second := b.startWorker(worker.Config{WorkDir: dir, Workloads: wl})
	second.waitLog(t, "another running worker uses this work directory", 10*time.Second)
	if _, err := os.Stat(filepath.Join(dir, "s0:01bb-0", "1")); err != nil {
		t.Errorf("a worker removed a task directory while another worker shares the work directory: %v", err)
	}
}
