package scimeshv1_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is where buf.yaml, buf.gen.yaml and tools/go.mod are, relative to
// this package's directory (go test runs a test in its package's directory).
const repoRoot = "../../.."

// buf runs the pinned buf CLI (tools/go.mod) in the repository root.
func buf(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=tools/go.mod", "buf"}, args...)...)
	cmd.Dir = repoRoot
	return cmd.CombinedOutput()
}

// needToolchain skips the test when buf or the plugins cannot be built or
// run here (no go command, or their modules neither cached nor reachable);
// under CI that is a failure instead. The first build of buf takes a minute
// or two; after that the go command caches it.
func needToolchain(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		skipOrFail(t, "no go command in PATH: %v", err)
	}
	for _, args := range [][]string{
		{"tool", "-modfile=tools/go.mod", "buf", "--version"},
		{"tool", "protoc-gen-go", "--version"},
		{"tool", "protoc-gen-connect-go", "--version"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			skipOrFail(t, "cannot run `go %s` (%v):\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf("proto toolchain unavailable, generated code not checked: "+format, args...)
}

// TestGeneratedUpToDate regenerates the code into a temporary directory and
// compares it byte for byte with the committed files, so a .proto edited
// without `make proto` (or a generated file edited by hand, or left behind
// by a removed .proto) fails the build.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	needToolchain(t)

	out := t.TempDir()
	if msg, err := buf(t, "generate", "--output", out); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, msg)
	}
	want := generatedFiles(t, filepath.Join(out, "proto"))
	got := generatedFiles(t, filepath.Join(repoRoot, "proto"))
	if len(want) == 0 {
		t.Fatal("buf generate produced no Go files")
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("proto/%s is missing: run `make proto`", name)
		case !bytes.Equal(g, w):
			t.Errorf("proto/%s is out of date: run `make proto`", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("proto/%s is not generated from any .proto: run `make proto`", name)
		}
	}
}

// TestLint keeps the protos `buf lint` clean and `buf format`ted.
func TestLint(t *testing.T) {
	t.Parallel()
	needToolchain(t)

	if msg, err := buf(t, "lint"); err != nil {
		t.Errorf("buf lint: %v\n%s", err, msg)
	}
	if msg, err := buf(t, "format", "--diff", "--exit-code"); err != nil {
		t.Errorf("buf format: %v (run `make proto`)\n%s", err, msg)
	}
}

// generatedFiles reads the generated Go files under dir, keyed by their path
// relative to dir.
func generatedFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(path, ".pb.go") && !strings.HasSuffix(path, ".connect.go") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("read generated files: %v", err)
	}
	return files
}
