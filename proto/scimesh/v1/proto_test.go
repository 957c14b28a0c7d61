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

// needFull skips the test unless SCIMESH_PROTO_FULL=1 is set, and then
// fails it if buf or the plugins cannot be built or run here.
//
// These tests run buf, and on a cold build cache (a clean clone, as in CI)
// building buf takes a minute or two, most of the cost of `make test`. What
// they prove is checked on every run, in milliseconds, by the stamp that
// `make proto` writes after formatting, linting and generating
// (proto/scimesh/v1/generated.sum, checked by the test of proto/stamp). These
// do not trust the stamp: run them after changing the stamp program or the
// Makefile's proto target, or whenever the stamp is in doubt:
//
//	SCIMESH_PROTO_FULL=1 go test -count=1 ./proto/...
func needFull(t *testing.T) {
	t.Helper()
	if os.Getenv("SCIMESH_PROTO_FULL") != "1" {
		t.Skip("runs buf; set SCIMESH_PROTO_FULL=1 to run it (the stamp check in proto/stamp always runs)")
	}
	for _, args := range [][]string{
		{"tool", "-modfile=tools/go.mod", "buf", "--version"},
		{"tool", "protoc-gen-go", "--version"},
		{"tool", "protoc-gen-connect-go", "--version"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cannot run `go %s` (%v):\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestGeneratedFull regenerates the code into a temporary directory and
// compares it byte for byte with the committed files, so a .proto edited
// without `make proto` (or a generated file edited by hand, or left behind
// by a removed .proto) fails. Opt-in: see needFull.
func TestGeneratedFull(t *testing.T) {
	t.Parallel()
	needFull(t)

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

// TestLintFull keeps the protos `buf lint` clean and `buf format`ted.
// Opt-in: see needFull.
func TestLintFull(t *testing.T) {
	t.Parallel()
	needFull(t)

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
