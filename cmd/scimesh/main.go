// Command scimesh is SciMesh's one binary: the coordinator, the worker and
// the client commands. It holds the commands that build a coordinator or a
// worker: their flags, resolved by internal/config into the config of a
// library package (internal/server for serve, internal/worker, and
// internal/demo, internal/slurm), which it runs. The client commands are
// internal/clientcmd's. The load generators are in scimesh-bench, which
// users never need (TestBinaryLinksNoBenchOrTestCode).
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
