package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// source is a Source of flags given as args, environment env and .env
// file, for tests that run in parallel (Load reads the process's).
func source(t *testing.T, declare func(*pflag.FlagSet), args []string, env, file map[string]string) *Source {
	t.Helper()
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	declare(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return &Source{flags: f, lookup: lookup, file: file}
}

func TestSettingPrecedence(t *testing.T) {
	t.Parallel()
	declare := func(f *pflag.FlagSet) { f.String("shard", DefaultShard, "") }
	file := map[string]string{"SCIMESH_SHARD": "fromfile"}
	env := map[string]string{"SCIMESH_SHARD": "fromenv"}
	for _, c := range []struct {
		name      string
		args      []string
		env, file map[string]string
		want      string
	}{
		{"default", nil, nil, nil, DefaultShard},
		{".env", nil, nil, file, "fromfile"},
		{"environment over .env", nil, env, file, "fromenv"},
		{"flag over both", []string{"--shard", "fromflag"}, env, file, "fromflag"},
		{"an empty variable is unset", nil, map[string]string{"SCIMESH_SHARD": ""}, nil, DefaultShard},
	} {
		s := source(t, declare, c.args, c.env, c.file)
		if got := s.Setting("shard", "SCIMESH_SHARD", DefaultShard); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// Get: a variable set empty in the environment hides the file's.
	s := source(t, declare, nil, map[string]string{"CLIENT_AUTH_TOKEN": ""}, map[string]string{"CLIENT_AUTH_TOKEN": "filetok"})
	if got := s.Get("CLIENT_AUTH_TOKEN"); got != "" {
		t.Errorf("Get of a variable set empty: %q, want the environment's empty value", got)
	}
}

// TestLoad reads the file ENV_FILE names, and refuses one that is not
// there; the process's environment wins over it. Not parallel: it sets
// the process's environment.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "other.env")
	if err := os.WriteFile(path, []byte("SCIMESH_SHARD=fromother\nSCIMESH_ADDR=127.0.0.1:9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ENV_FILE", path)
	t.Setenv("SCIMESH_ADDR", "127.0.0.1:7")
	s, err := Load(pflag.NewFlagSet("test", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Get("SCIMESH_SHARD"); got != "fromother" {
		t.Errorf("SCIMESH_SHARD from ENV_FILE: %q", got)
	}
	if got := s.Get("SCIMESH_ADDR"); got != "127.0.0.1:7" {
		t.Errorf("SCIMESH_ADDR set in the environment and the file: %q, want the environment's", got)
	}
	t.Setenv("ENV_FILE", filepath.Join(dir, "missing.env"))
	if _, err := Load(pflag.NewFlagSet("test", pflag.ContinueOnError)); err == nil || !strings.Contains(err.Error(), "missing.env") {
		t.Errorf("Load of a missing ENV_FILE: %v, want an error naming it", err)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	declare := func(f *pflag.FlagSet) { AddRetentionFlags(f, "older-than", "") }
	s := source(t, declare, []string{"--older-than", "48h"}, map[string]string{"SCIMESH_UPLOAD_RETENTION": "0"}, nil)
	r, err := s.Retention("older-than")
	if err != nil || r.Jobs.Hours() != 48 || r.Uploads != 0 {
		t.Fatalf("Retention: %+v, %v; want 48h for jobs and 0 for uploads", r, err)
	}
	s = source(t, declare, nil, map[string]string{"SCIMESH_RETENTION": "-1h"}, nil)
	if _, err := s.Retention("older-than"); err == nil || !strings.Contains(err.Error(), "--older-than (or SCIMESH_RETENTION)") {
		t.Fatalf("a negative retention: %v, want an error naming the flag and the variable", err)
	}
}
