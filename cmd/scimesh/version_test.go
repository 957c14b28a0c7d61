package main

import (
	"debug/buildinfo"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	buildversion "github.com/scimesh/scimesh/internal/version"
)

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
	var v buildversion.Info
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
