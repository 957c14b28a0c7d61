//go:build !linux

package worker

// hideFromUser does nothing outside Linux, where PR_SET_DUMPABLE does not
// exist; other systems guard a process's environment in their own ways.
func hideFromUser() error { return nil }
