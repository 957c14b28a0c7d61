package clientcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/tests/framework"
	"github.com/scimesh/scimesh/tests/framework/inprocess"
)

// run runs the client command of args in this process with the flags of
// coordinator url, and returns its standard output and error.
func run(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "scimesh", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands()...)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--coordinator", url, "--token", framework.ClientToken))
	root.SetContext(t.Context())
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestCommandsInProcess runs submit --wait, status and jobs against a
// coordinator and a worker in this process: the commands need nothing
// but their flags and the coordinator's API.
func TestCommandsInProcess(t *testing.T) {
	t.Parallel()
	r := inprocess.Runner{}
	coord := r.Serve(t, framework.ServeConfig{})
	r.Worker(t, coord.URL(), framework.WorkerConfig{Workloads: []string{`rank=cut -d, -f1,2`}})
	table := filepath.Join(t.TempDir(), "mols.csv")
	if err := os.WriteFile(table, []byte("id,score\na,1\nb,5\nc,3\nd,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, coord.URL(), "submit", table, "--workload", "rank", "--top-k", "2", "--chunk-rows", "2", "--wait")
	if err != nil || out != "id,score\nb,5\nd,4\n" {
		t.Fatalf("submit --wait: %v; stdout %q; stderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "uploaded "+table+": 5 rows") || !strings.Contains(errOut, "2 chunks") {
		t.Errorf("submit --wait told on stderr:\n%s", errOut)
	}
	out, _, err = run(t, coord.URL(), "jobs", "--json")
	var list client.JobList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Jobs) != 1 || list.Jobs[0].Name != "mols.csv" {
		t.Fatalf("jobs --json: %v, %s", err, out)
	}
	out, _, err = run(t, coord.URL(), "status", list.Jobs[0].JobID)
	if err != nil || !strings.Contains(out, "status    completed") || !strings.Contains(out, "(2 of 2 chunks)") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// A job that does not exist: the coordinator's 404, and nothing on
	// standard output.
	out, _, err = run(t, coord.URL(), "status", "s0:nosuchjob")
	if err == nil || !strings.Contains(err.Error(), "404") || out != "" {
		t.Fatalf("status of no job: %v, stdout %q", err, out)
	}
}
