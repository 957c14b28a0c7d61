// Command scimesh is SciMesh's one binary: the coordinator, the worker and
// the client commands. It is the composition root: the only place that picks
// concrete types and wires them together.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "scimesh:", err)
		os.Exit(1)
	}
}
