//go:build !unix

package worker

import "os"

// pending reports false outside Unix, where a pipe cannot be looked at
// without reading it: a persistent process's output written after its
// done frame is found only when it is in the worker's buffer already.
func pending(*os.File) bool { return false }
