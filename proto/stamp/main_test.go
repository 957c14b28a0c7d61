package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root relative to this package's directory (go
// test runs a test in its package's directory).
const repoRoot = "../.."

// TestGeneratedUpToDate recomputes the stamp of the tree and compares it with
// the committed one, so a .proto edited without `make proto`, a generated file
// edited by hand, left behind or missing, or a generator's version changed
// fails the build. See the package comment for why a matching stamp also
// means the protos are formatted and lint-clean.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	if err := check(repoRoot); err != nil {
		t.Fatal(err)
	}
}

// check compares the stamp of the tree at root with the committed one and
// says, line by line, what differs.
func check(root string) error {
	got, err := stamp(root)
	if err != nil {
		return err
	}
	committed, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(stampPath)))
	if err != nil {
		return fmt.Errorf("read the stamp (run `make proto`): %w", err)
	}
	committed = bytes.ReplaceAll(committed, []byte("\r\n"), []byte("\n"))
	if bytes.Equal(got, committed) {
		return nil
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "%s does not match the tree; run `make proto` and commit what it changes:", stampPath)
	lines := diff(committed, got)
	for _, l := range lines {
		msg.WriteString("\n\t" + l)
	}
	if len(lines) == 0 {
		msg.WriteString("\n\tthe stamp's comments or layout differ")
	}
	return fmt.Errorf("%s", msg.String())
}

// diff lists the keys (module paths, file paths) whose values differ between
// the stamps committed and got.
func diff(committed, got []byte) []string {
	c, g := entries(committed), entries(got)
	var out []string
	for k, cv := range c {
		switch gv, ok := g[k]; {
		case !ok:
			out = append(out, fmt.Sprintf("%s: in the stamp but not in the tree", k))
		case gv != cv:
			out = append(out, fmt.Sprintf("%s: changed since `make proto` (stamp %s, tree %s)", k, cv, gv))
		}
	}
	for k := range g {
		if _, ok := c[k]; !ok {
			out = append(out, fmt.Sprintf("%s: in the tree but not in the stamp", k))
		}
	}
	slices.Sort(out)
	return out
}

// entries parses a stamp's "key value" lines, skipping comments and blanks.
func entries(s []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(s)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		m[k] = v
	}
	return m
}

// TestStampDetects applies each change the stamp must catch to a copy of the
// tree and checks that the check fails naming the changed path or module, and
// that changes it must ignore leave the stamp as it is.
func TestStampDetects(t *testing.T) {
	t.Parallel()
	const (
		proto     = "proto/scimesh/v1/queue.proto"
		generated = "proto/scimesh/v1/queue.pb.go"
		connect   = "proto/scimesh/v1/scimeshv1connect/queue.connect.go"
	)
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, root string)
		want   string // in check's error; empty: the check passes
	}{
		{"nothing", func(*testing.T, string) {}, ""},
		{"proto comment edited", func(t *testing.T, root string) {
			edit(t, root, proto, func(s string) string {
				return strings.Replace(s, "// ", "//  ", 1)
			})
		}, proto + ": changed"},
		{"proto removed", func(t *testing.T, root string) { remove(t, root, proto) }, proto + ": in the stamp but not"},
		{"proto added", func(t *testing.T, root string) {
			create(t, root, "proto/scimesh/v1/extra.proto", `syntax = "proto3";`)
		}, "proto/scimesh/v1/extra.proto: in the tree but not"},
		{"buf.gen.yaml edited", func(t *testing.T, root string) {
			edit(t, root, "buf.gen.yaml", func(s string) string { return s + "\n" })
		}, "buf.gen.yaml: changed"},
		{"buf.yaml edited", func(t *testing.T, root string) {
			edit(t, root, "buf.yaml", func(s string) string { return s + "\n" })
		}, "buf.yaml: changed"},
		{"generated file edited by hand", func(t *testing.T, root string) {
			edit(t, root, generated, func(s string) string {
				i := strings.Index(s, "package ")
				return s[:i] + "P" + s[i+1:]
			})
		}, generated + ": changed"},
		{"connect file edited by hand", func(t *testing.T, root string) {
			edit(t, root, connect, func(s string) string { return s + "// edited\n" })
		}, connect + ": changed"},
		{"generated file missing", func(t *testing.T, root string) { remove(t, root, connect) }, connect + ": in the stamp but not"},
		{"generated file left behind", func(t *testing.T, root string) {
			create(t, root, "proto/scimesh/v1/old.pb.go", "package scimeshv1\n")
		}, "proto/scimesh/v1/old.pb.go: in the tree but not"},
		{"protobuf bumped", func(t *testing.T, root string) {
			bump(t, root, "go.mod", "google.golang.org/protobuf")
		}, "google.golang.org/protobuf: changed"},
		{"connect bumped", func(t *testing.T, root string) {
			bump(t, root, "go.mod", "connectrpc.com/connect")
		}, "connectrpc.com/connect: changed"},
		{"buf bumped", func(t *testing.T, root string) {
			bump(t, root, "tools/go.mod", "github.com/bufbuild/buf")
		}, "github.com/bufbuild/buf: changed"},
		{"protobuf replaced", func(t *testing.T, root string) {
			edit(t, root, "go.mod", func(s string) string {
				return s + "\nreplace google.golang.org/protobuf => ../protobuf\n"
			})
		}, "google.golang.org/protobuf: changed"},
		{"stamp edited", func(t *testing.T, root string) {
			edit(t, root, stampPath, func(s string) string {
				return strings.Replace(s, "sha256:", "sha256:0", 1)
			})
		}, "buf.gen.yaml: changed"},
		{"another dependency bumped", func(t *testing.T, root string) {
			bump(t, root, "go.mod", "golang.org/x/mod")
		}, ""},
		{"CRLF checkout", func(t *testing.T, root string) {
			for _, p := range []string{proto, generated, stampPath} {
				edit(t, root, p, func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") })
			}
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := copyTree(t)
			tt.change(t, root)
			err := check(root)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("check after the change: %v; want no error", err)
			case tt.want != "" && err == nil:
				t.Fatalf("check after the change passed; want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("check after the change: %v\nwant an error with %q", err, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), "run `make proto`"):
				t.Fatalf("check after the change: %v\nwant it to say to run `make proto`", err)
			}
		})
	}
}

// copyTree copies what the stamp reads to a new directory, stamps it there
// (as `make proto` would, so that a stale tree fails TestGeneratedUpToDate
// alone) and returns it.
func copyTree(t *testing.T) string {
	t.Helper()
	inputs, generated, err := files(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, p := range slices.Concat(inputs, generated, []string{"go.mod", "tools/go.mod"}) {
		data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		create(t, root, p, string(data))
	}
	if err := write(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestStampRelative checks that the stamp does not depend on where the tree
// is: a copy elsewhere has the same stamp.
func TestStampRelative(t *testing.T) {
	t.Parallel()
	want, err := stamp(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{abs, copyTree(t)} {
		got, err := stamp(root)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("stamp of %s:\n%s\nwant (stamp of %s):\n%s", root, got, repoRoot, want)
		}
	}
}

func create(t *testing.T, root, p, content string) {
	t.Helper()
	name := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func edit(t *testing.T, root, p string, change func(string) string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	after := change(string(data))
	if after == string(data) {
		t.Fatalf("the edit left %s as it was", p)
	}
	create(t, root, p, after)
}

func remove(t *testing.T, root, p string) {
	t.Helper()
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
		t.Fatal(err)
	}
}

// bump raises the version of module that gomod requires.
func bump(t *testing.T, root, gomod, module string) {
	t.Helper()
	v, err := moduleVersion(filepath.Join(root, filepath.FromSlash(gomod)), module)
	if err != nil {
		t.Fatal(err)
	}
	edit(t, root, gomod, func(s string) string {
		return strings.Replace(s, module+" "+v, module+" "+v+"-bumped", 1)
	})
}

// TestModuleVersion pins how a requirement and its replacement are read.
func TestModuleVersion(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, gomod, want string
	}{
		{"single line", "module m\nrequire example.com/a v1.2.3\n", "v1.2.3"},
		{"block, indirect", "module m\nrequire (\n\texample.com/b v0.1.0\n\texample.com/a v1.2.3 // indirect\n)\n", "v1.2.3"},
		{"replaced, any version", "module m\nrequire example.com/a v1.2.3\nreplace example.com/a => example.com/fork v1.0.0\n", "v1.2.3 => example.com/fork v1.0.0"},
		{"replaced, this version, by a directory", "module m\nrequire example.com/a v1.2.3\nreplace example.com/a v1.2.3 => ../a\n", "v1.2.3 => ../a"},
		{"replaced, another version", "module m\nrequire example.com/a v1.2.3\nreplace example.com/a v1.0.0 => ../a\n", "v1.2.3"},
		{"prefix of another module", "module m\nrequire (\n\texample.com/a/b v0.9.0\n\texample.com/a v1.2.3\n)\n", "v1.2.3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := filepath.Join(t.TempDir(), "go.mod")
			if err := os.WriteFile(name, []byte(tt.gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := moduleVersion(name, "example.com/a")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("moduleVersion = %q, want %q", got, tt.want)
			}
		})
	}

	name := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(name, []byte("module m\nrequire example.com/b v1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := moduleVersion(name, "example.com/a"); err == nil {
		t.Errorf("moduleVersion of a module not required = %q, want an error", v)
	}
}
