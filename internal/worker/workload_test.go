package worker_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/worker"
)

// TestDefaultVersion: a built-in's version names it; a command's changes
// with the command and with the bytes of the program its first word
// names, and with nothing else.
func TestDefaultVersion(t *testing.T) {
	t.Parallel()
	version := func(wl worker.Workload) string {
		t.Helper()
		v, err := worker.DefaultVersion(wl)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(mustWorkload(t, "tanimoto")); v != "builtin:tanimoto:1" {
		t.Errorf("the built-in's version is %q", v)
	}
	script := filepath.Join(t.TempDir(), "score.sh")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("#!/bin/sh\ncat\n")
	cmd := worker.Workload{Name: "score", Command: script + " --fast"}
	v1 := version(cmd)
	if len(v1) != 64 || version(cmd) != v1 {
		t.Fatalf("the version %q is not a stable SHA-256", v1)
	}
	if version(worker.Workload{Name: "other", Command: cmd.Command}) != v1 {
		t.Error("the version depends on the workload's name")
	}
	if version(worker.Workload{Name: "score", Command: script + " --slow"}) == v1 {
		t.Error("another command has the same version")
	}
	write("#!/bin/sh\ncat -u\n")
	if version(cmd) == v1 {
		t.Error("the program's new bytes have the same version")
	}
	missing := worker.Workload{Name: "score", Command: "/no/such/program x"}
	if v := version(missing); len(v) != 64 || v == v1 {
		t.Errorf("a command whose program is not found: version %q", v)
	}
}

// TestWorkloadVersionsAnnounced: a worker announces each workload's
// version with its claims, the one its operator gave or the default.
func TestWorkloadVersionsAnnounced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fixed := mustWorkload(t, "score="+scoreCommand)
	fixed.Version = "2.0+gpu"
	b.startWorker(worker.Config{Workloads: []worker.Workload{fixed, mustWorkload(t, "tanimoto")}})
	want := map[string][]string{"score": {"2.0+gpu"}, "tanimoto": {"builtin:tanimoto:1"}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := b.client.Workloads(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, w := range ws {
			got[w.Name] = w.Versions
		}
		if len(got) == 2 && slices.Equal(got["score"], want["score"]) && slices.Equal(got["tanimoto"], want["tanimoto"]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /workloads gives versions %v; want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestParseWorkloads(t *testing.T) {
	t.Parallel()
	wls, err := worker.ParseWorkloads([]string{"rank=./rank.sh", "dock=dock --fast"}, []string{"dock"}, []string{"rank=v2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(wls) != 2 || wls[0].Name != "rank" || wls[0].Persistent || wls[0].Version != "v2" ||
		wls[1].Name != "dock" || !wls[1].Persistent || wls[1].Version == "v2" {
		t.Fatalf("workloads %+v; want rank at version v2, and dock persistent", wls)
	}
	for _, c := range []struct {
		specs, persistent, versions []string
		want                        string
	}{
		{nil, nil, nil, "no workload"},
		{[]string{"rank=x"}, []string{"dock"}, nil, "--persistent dock names no workload"},
		{[]string{"rank=x"}, nil, []string{"rank"}, "gives no version"},
		{[]string{"rank=x"}, nil, []string{"dock=v1"}, "--workload-version dock=v1 names no workload"},
	} {
		if _, err := worker.ParseWorkloads(c.specs, c.persistent, c.versions); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("worker.ParseWorkloads(%q, %q, %q): %v, want an error with %q", c.specs, c.persistent, c.versions, err, c.want)
		}
	}
}
