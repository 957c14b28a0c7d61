// Command stamp writes proto/scimesh/v1/generated.sum, the stamp of the
// generated protobuf and Connect code. `make proto` runs it from the
// repository root as its last step,
//
//	go run ./proto/stamp
//
// and its test, which always runs, recomputes the stamp from the tree and
// compares it with the committed one. Both call [stamp], so what is written
// and what is checked cannot drift apart.
//
// The stamp lists the versions of the code generators (buf, pinned in
// tools/go.mod; google.golang.org/protobuf and connectrpc.com/connect, the
// modules of protoc-gen-go and protoc-gen-connect-go, in go.mod) and the
// sha256 of every input (buf.yaml, buf.gen.yaml, each .proto under proto/)
// and of every generated file (each *.pb.go and *.connect.go under proto/).
// A stamp that matches the tree therefore proves that the committed code is
// what `make proto` made from the committed protos with the pinned
// generators, and, since `make proto` formats (buf format -w) and lints (buf
// lint) the protos before it generates and stops at the first failure, that
// the protos were formatted and lint-clean. The proof rests on the stamp being
// written only by `make proto`: running this command by hand after editing a
// generated file would bless the edit. The test that regenerates the code with
// buf and compares it byte for byte (proto/scimesh/v1, SCIMESH_PROTO_FULL=1)
// does not rely on that.
//
// The stamp is deterministic: paths are relative to the repository root,
// slash-separated and sorted, lines end in LF, and a file's CRLF line endings
// (a Windows checkout) are read as LF before hashing.
package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// stampPath is where the stamp is committed, relative to the repository root.
const stampPath = "proto/scimesh/v1/generated.sum"

// header opens the stamp.
const header = `# The stamp of the generated code: written by ` + "`make proto`" + ` after it
# formatted, linted and regenerated the protos, checked by go test ./proto/...
# Do not edit; run ` + "`make proto`" + `.
`

// generator is a module whose version decides the generated code, and the
// go.mod that pins it.
type generator struct {
	gomod, module string
}

// generators are buf (which parses the protos and drives the plugins) and the
// modules of the two plugins, protoc-gen-go and protoc-gen-connect-go.
var generators = []generator{
	{"tools/go.mod", "github.com/bufbuild/buf"},
	{"go.mod", "connectrpc.com/connect"},
	{"go.mod", "google.golang.org/protobuf"},
}

func main() {
	if err := write("."); err != nil {
		fmt.Fprintf(os.Stderr, "stamp: %v\n", err)
		os.Exit(1)
	}
}

// write writes the stamp of the tree at root to its place in that tree.
func write(root string) error {
	s, err := stamp(root)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, filepath.FromSlash(stampPath)), s, 0o644)
}

// stamp returns the stamp of the repository tree at root: one line
// "key value" per generator (module path, version) and per file (path,
// sha256), after the header and a comment opening each section.
func stamp(root string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(root, "buf.gen.yaml")); err != nil {
		return nil, fmt.Errorf("%s is not the repository root (run from there): %w", root, err)
	}
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("\n# generators\n")
	for _, g := range generators {
		v, err := moduleVersion(filepath.Join(root, filepath.FromSlash(g.gomod)), g.module)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s %s\n", g.module, v)
	}
	inputs, generated, err := files(root)
	if err != nil {
		return nil, err
	}
	for _, section := range []struct {
		name  string
		paths []string
	}{{"inputs", inputs}, {"generated", generated}} {
		fmt.Fprintf(&b, "\n# %s\n", section.name)
		for _, p := range section.paths {
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "%s sha256:%x\n", p, sha256.Sum256(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))))
		}
	}
	return b.Bytes(), nil
}

// files returns the inputs of `make proto` (buf.yaml, buf.gen.yaml and the
// .proto files under proto/) and the generated files under proto/, each list
// sorted, as slash-separated paths relative to root. `make proto` deletes
// every generated file under proto/ before it generates, so any there
// afterwards is its output.
func files(root string) (inputs, generated []string, err error) {
	inputs = []string{"buf.gen.yaml", "buf.yaml"}
	err = filepath.WalkDir(filepath.Join(root, "proto"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch name := path.Base(rel); {
		case strings.HasSuffix(name, ".proto"):
			inputs = append(inputs, rel)
		case strings.HasSuffix(name, ".pb.go"), strings.HasSuffix(name, ".connect.go"):
			generated = append(generated, rel)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list the protos and the generated code: %w", err)
	}
	slices.Sort(inputs)
	slices.Sort(generated)
	return inputs, generated, nil
}

// moduleVersion returns the version of module that the go.mod file gomod
// requires, followed by " => " and its replacement if gomod replaces it.
// It reads the file rather than asking the go command, which would load the
// whole module graph (and might download it) to answer.
func moduleVersion(gomod, module string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	f, err := modfile.Parse(gomod, data, nil)
	if err != nil {
		return "", err
	}
	version := ""
	for _, r := range f.Require {
		if r.Mod.Path == module {
			version = r.Mod.Version
		}
	}
	if version == "" {
		return "", fmt.Errorf("%s does not require %s", gomod, module)
	}
	for _, r := range f.Replace {
		if r.Old.Path == module && (r.Old.Version == "" || r.Old.Version == version) {
			version += " => " + strings.TrimSpace(r.New.Path+" "+r.New.Version)
		}
	}
	return version, nil
}
