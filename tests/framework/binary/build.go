// Package binary is the framework's runner of the scimesh binary: serve
// and worker as processes, and the client commands for Client. Its
// process helpers (Start, Serve, Run, Output) are also what the tests of
// tests/e2e start every process with.
package binary

import (
	"fmt"
	"os"
	"os/exec"
)

// Build builds the command of the module's package pkg (such as
// "cmd/scimesh") into out, with the race detector when race is set.
func Build(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/scimesh/scimesh/"+pkg)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}
