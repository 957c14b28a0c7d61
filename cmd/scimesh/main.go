// Command scimesh is SciMesh's one binary: the coordinator, the worker and
// the client commands. It holds only the commands, their flags and the
// environment (.env included): each command turns those into the config of
// a library package — internal/server for serve (and for demo),
// internal/worker, internal/client — and runs it. The load generators are
// in scimesh-bench, which users never need (TestBinaryLinksNoBenchOrTestCode).
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
