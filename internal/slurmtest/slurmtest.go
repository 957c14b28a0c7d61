// Package slurmtest starts a real single-node Slurm cluster for a test:
// Debian's slurm-wlm (slurmctld, slurmd and the client commands) and munge,
// all on loopback, configured in the test's temporary directory. munged runs
// with a key, socket, pid file and log of its own there, and slurmctld and
// slurmd on free ports, so that clusters of tests running at once (in one
// test binary or several) do not meet. The daemons run in the foreground as
// the test's children, and are stopped when the test ends, after its Slurm
// jobs are cancelled.
//
// Without Slurm or munge installed, or when the cluster does not come up,
// the test is skipped with a loud message — unless the CI environment
// variable is set, when it fails.
package slurmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
)

// CPUs is how many CPUs the cluster's one node offers, whatever the
// machine has (slurmd is told to trust its configuration), so that tests
// may run several one-CPU jobs at once on a small machine.
const CPUs = 8

// KillWait is the cluster's KillWait: the seconds between the SIGTERM that
// ends a job (at its time limit, or when cancelled) and the SIGKILL.
const KillWait = 5

// Cluster is a running single-node Slurm cluster.
type Cluster struct {
	// Dir holds the configuration, the daemons' state, spools and logs.
	Dir string
	// Conf is the path of slurm.conf: SLURM_CONF for the commands.
	Conf string
	// Partition is the node's one partition, the default.
	Partition string
	// Node is the node's name, this host's short name.
	Node string
}

// daemons to find, with their paths on Debian.
var (
	munged    = "/usr/sbin/munged"
	mungekey  = "/usr/sbin/mungekey"
	slurmctld = "/usr/sbin/slurmctld"
	slurmd    = "/usr/sbin/slurmd"
)

// unavailable skips t loudly, or fails it under CI.
func unavailable(t *testing.T, why string) {
	t.Helper()
	msg := "slurmtest: NO SLURM: " + why + "; install Debian's slurm-wlm and munge to run the Slurm tests"
	testenv.Missing(t, msg)
}

// Start starts a cluster for t, waits until its node is idle, and stops it
// when t ends.
func Start(t *testing.T) *Cluster {
	t.Helper()
	for _, p := range []string{munged, mungekey, slurmctld, slurmd} {
		if _, err := os.Stat(p); err != nil {
			unavailable(t, p+" is missing")
		}
	}
	for _, c := range []string{"sbatch", "sinfo", "squeue", "scancel"} {
		if _, err := exec.LookPath(c); err != nil {
			unavailable(t, c+" is not on PATH")
		}
	}
	// munged wants a socket directory others may enter; t.TempDir's is
	// 0700.
	dir, err := os.MkdirTemp("", "slurmtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Partition: "debug", Node: host}
	var d daemons
	t.Cleanup(func() { c.stop(t, &d) })

	key := filepath.Join(dir, "munge.key")
	if out, err := exec.Command(mungekey, "--create", "--keyfile", key).CombinedOutput(); err != nil {
		unavailable(t, fmt.Sprintf("mungekey: %v: %s", err, out))
	}
	sock := filepath.Join(dir, "munge.socket")
	d.start(t, munged, "--foreground", "--force", "--socket", sock, "--key-file", key,
		"--log-file", filepath.Join(dir, "log", "munged.log"), "--pid-file", filepath.Join(dir, "munged.pid"),
		"--seed-file", filepath.Join(dir, "munged.seed"))
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }) {
		unavailable(t, "munged did not create its socket: "+d.output())
	}

	ports := testenv.FreePorts(t, 2)
	conf := fmt.Sprintf(`ClusterName=slurmtest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
SlurmUser=root
SlurmdUser=root
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=%[6]d
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[7]d RealMemory=4000 State=UNKNOWN
PartitionName=%[8]s Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, host, ports[0], ports[1], sock, dir, KillWait, CPUs, c.Partition)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start(t, slurmctld, "-D", "-f", c.Conf)
	d.start(t, slurmd, "-D", "-f", c.Conf)
	var state string
	if !waitFor(30*time.Second, func() bool {
		out, _ := c.Command("sinfo", "-h", "-o", "%t").Output()
		state = strings.TrimSpace(string(out))
		return state == "idle"
	}) {
		logs, _ := os.ReadFile(filepath.Join(dir, "log", "slurmctld.log"))
		unavailable(t, fmt.Sprintf("the node is %q, not idle, 30 s after the start: %s\n%s", state, d.output(), testenv.LastLines(string(logs), 20)))
	}
	return c
}

// Env is the environment entry that points Slurm's commands at c.
func (c *Cluster) Env() string { return "SLURM_CONF=" + c.Conf }

// Command is a Slurm command (sbatch, squeue, …) for c, with the test's
// environment and SLURM_CONF.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), c.Env())
	return cmd
}

// Jobs lists the IDs (%i: JOBID_TASK for array tasks) and states (%T) of
// c's jobs, one "ID STATE" a line.
func (c *Cluster) Jobs() (string, error) {
	out, err := c.Command("squeue", "-h", "-o", "%i %T").CombinedOutput()
	return string(out), err
}

// stop cancels every job, waits (a little longer than KillWait) for them
// to end, and stops the daemons.
func (c *Cluster) stop(t *testing.T, d *daemons) {
	if d.running() >= 3 {
		if u, err := user.Current(); err == nil {
			_ = c.Command("scancel", "--full", "--user", u.Username).Run()
		}
		waitFor(3*KillWait*time.Second, func() bool {
			out, err := c.Jobs()
			return err != nil || strings.TrimSpace(out) == ""
		})
	}
	if t.Failed() {
		for _, name := range []string{"slurmctld.log", "slurmd.log"} {
			logs, _ := os.ReadFile(filepath.Join(c.Dir, "log", name))
			t.Logf("%s:\n%s", name, testenv.LastLines(string(logs), 30))
		}
	}
	d.stop()
}

// daemons are the cluster's daemons, stopped in the reverse order of
// their start.
type daemons struct {
	cmds []*exec.Cmd
	done []chan struct{}
	out  bytes.Buffer // their output, all together
	mu   sync.Mutex
}

func (d *daemons) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.Write(p)
}

func (d *daemons) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return testenv.LastLines(d.out.String(), 20)
}

func (d *daemons) start(t *testing.T, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = d, d
	if err := cmd.Start(); err != nil {
		unavailable(t, fmt.Sprintf("start %s: %v", path, err))
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	d.cmds = append(d.cmds, cmd)
	d.done = append(d.done, done)
}

// running is how many daemons were started and still run.
func (d *daemons) running() int {
	n := 0
	for _, done := range d.done {
		select {
		case <-done:
		default:
			n++
		}
	}
	return n
}

// stop ends each daemon by its PID: SIGTERM, and SIGKILL 10 s later.
func (d *daemons) stop() {
	for i := len(d.cmds) - 1; i >= 0; i-- {
		_ = d.cmds[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done[i]:
		case <-time.After(10 * time.Second):
			_ = d.cmds[i].Process.Kill()
			<-d.done[i]
		}
	}
}

func waitFor(timeout time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
