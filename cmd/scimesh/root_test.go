package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCommandTree: the root command holds every command of the contract,
// each with the flags scripts name. The end-to-end tests (tests/e2e) run
// them; this checks the wiring without a binary.
func TestCommandTree(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	for path, flags := range map[string][]string{
		"serve":              {"db", "data-dir", "blobs", "addr", "shard", "topology", "retention", "upload-retention", "tls-cert", "tls-key", "migrate", "pprof"},
		"worker":             {"coordinator", "token", "id", "concurrency", "workload", "workload-version", "persistent", "max-runtime", "until"},
		"submit":             {"coordinator", "token", "workload", "top-k", "chunk-rows", "param", "wait", "output", "no-cache", "speculate-after"},
		"wait":               {"output"},
		"status":             {"json"},
		"jobs":               {"status", "limit", "cursor", "json"},
		"result":             {"output", "partial"},
		"logs":               {"follow"},
		"cancel":             {"coordinator"},
		"retry":              {"coordinator"},
		"prune":              {"db", "older-than", "upload-retention", "dry-run"},
		"migrate":            {"db"},
		"demo":               {"rows", "workers"},
		"slurm submit":       {"coordinator", "workload", "jobs", "time", "partition", "cpus-per-task", "concurrency", "sbatch-arg", "dry-run", "token-file"},
		"account add":        {"weight", "max-running", "max-jobs", "max-storage", "admin"},
		"account list":       nil,
		"account show":       nil,
		"account set":        {"weight"},
		"account disable":    nil,
		"account enable":     nil,
		"account token":      {"revoke-others"},
		"worker-key add":     nil,
		"worker-key list":    nil,
		"worker-key revoke":  nil,
		"worker-key trust":   nil,
		"worker-key untrust": nil,
		"workers":            {"limit", "json"},
		"usage":              {"since", "until", "by", "json"},
		"audit":              {"since", "limit"},
		"version":            {"json"},
	} {
		cmd, rest, err := root.Find(strings.Fields(path))
		if err != nil || len(rest) != 0 || cmd.CommandPath() != "scimesh "+path {
			t.Errorf("scimesh %s: found %q with %q left, %v", path, commandPath(cmd), rest, err)
			continue
		}
		if cmd.RunE == nil {
			t.Errorf("scimesh %s runs nothing", path)
		}
		for _, f := range flags {
			if cmd.Flags().Lookup(f) == nil {
				t.Errorf("scimesh %s has no --%s", path, f)
			}
		}
	}
}

func commandPath(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	return cmd.CommandPath()
}
