package main

import (
	"debug/buildinfo"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	vcs := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		ok              bool
		wantV, wantC    string
	}{
		{"stamped", "v1.2.3", "abc123", vcs("vcs.revision", "fff"), true, "v1.2.3", "abc123"},
		{"plain build in a clean tree", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "false"), true, "dev", "abc123"},
		{"plain build in a changed tree", "", "", vcs("vcs.revision", "abc123", "vcs.modified", "true"), true, "dev", "abc123-dirty"},
		{"plain build outside git", "", "", vcs("-trimpath", "true"), true, "dev", "unknown"},
		{"no build info", "", "", nil, false, "dev", "unknown"},
	} {
		got := versionOf(tc.version, tc.commit, tc.info, tc.ok)
		if got.Version != tc.wantV || got.Commit != tc.wantC {
			t.Errorf("%s: got version %q commit %q, want %q %q", tc.name, got.Version, got.Commit, tc.wantV, tc.wantC)
		}
		if got.Go != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
			t.Errorf("%s: got go %q platform %q, want %q %s/%s", tc.name, got.Go, got.Platform, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
	}
}

// TestVersionCommand runs the binary of a plain `go build`: it must call
// itself "dev" and name the commit the toolchain recorded, or "unknown"
// when it recorded none (the go command finds no repository in a git
// worktree, whose .git is a file). The ldflags-stamped form is checked on
// release builds (python/tests/test_release.py).
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// -buildvcs=true: the go command's default (auto) may be turned off in
	// GOFLAGS, as it is on machines that build from copies without git.
	plain := filepath.Join(dir, "scimesh")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", plain, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	wantCommit := "unknown"
	info, err := buildinfo.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			head, err := exec.Command("git", "rev-parse", "HEAD").Output()
			if err != nil {
				t.Fatalf("git rev-parse HEAD: %v", err)
			}
			if s.Value != strings.TrimSpace(string(head)) {
				t.Fatalf("go build recorded revision %s, git says HEAD is %s", s.Value, head)
			}
			wantCommit = s.Value
		}
	}
	if wantCommit == "unknown" {
		t.Log("go build recorded no commit: checking that the binary says so")
	}
	runPlain := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(plain, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("scimesh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	out := runPlain("version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("scimesh version --json printed no JSON object: %v\n%s", err, out)
	}
	if v.Version != "dev" || strings.TrimSuffix(v.Commit, "-dirty") != wantCommit || v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("scimesh version --json = %+v, want version dev, commit %s, go %s, platform %s/%s", v, wantCommit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}

	out = runPlain("version")
	for _, want := range []string{"scimesh dev\n", "commit   " + v.Commit + "\n", "go       " + runtime.Version() + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("scimesh version printed\n%s\nwant a line %q", out, want)
		}
	}
}
