package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "scimesh.db")
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SCIMESH_SHARD=fromfile\nCLIENT_AUTH_TOKEN=filetok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shardOf := func(env []string, args ...string) string {
		p := serveProc(t, dir, env, append([]string{"--db", db}, args...)...)
		var j jobOut
		tok := "filetok"
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "CLIENT_AUTH_TOKEN="); ok {
				tok = v
			}
		}
		if s := call(t, "POST", p.URL+"/jobs", tok, map[string]any{"workload": "w", "input": map[string]any{"chunks": chunkList(1)}}, &j); s != 201 {
			t.Fatalf("create job: %d", s)
		}
		_ = p.Cmd.Process.Kill()
		shard, _, _ := strings.Cut(j.JobID, ":")
		return shard
	}
	if got := shardOf(nil); got != "fromfile" {
		t.Errorf(".env alone: shard %q, want fromfile", got)
	}
	if got := shardOf([]string{"SCIMESH_SHARD=fromenv", "CLIENT_AUTH_TOKEN=envtok"}); got != "fromenv" {
		t.Errorf("environment over .env: shard %q, want fromenv", got)
	}
	if got := shardOf([]string{"SCIMESH_SHARD=fromenv"}, "--shard", "fromflag"); got != "fromflag" {
		t.Errorf("flag over environment: shard %q, want fromflag", got)
	}
	other := filepath.Join(dir, "other.env")
	if err := os.WriteFile(other, []byte("SCIMESH_SHARD=fromother\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shardOf([]string{"ENV_FILE=" + other, "CLIENT_AUTH_TOKEN=x"}); got != "fromother" {
		t.Errorf("ENV_FILE: shard %q, want fromother", got)
	}
	out, err := run(t, dir, nil, "serve", "--shard", "Bad_Shard", "--db", db)
	if err == nil || !strings.Contains(out, "shard name") {
		t.Errorf("bad shard accepted: %v %s", err, out)
	}
}
