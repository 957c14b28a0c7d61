// Package testenv holds what the tests of many packages share: how a test
// that needs something this machine may lack (PostgreSQL, an S3 store,
// Slurm, a browser, a program) says so — it skips loudly, and fails when
// the CI environment variable is set, where every test must run — and the
// small readers and writers tests use to watch what code reads and logs.
// Only tests import it.
package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

var warned sync.Map // the messages already printed

// Missing skips t with msg, which says what is missing and how to get it,
// and prints msg once per process to stderr so that skips are not missed
// in a long run; when CI is set it fails t instead.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
	}
	if _, seen := warned.LoadOrStore(msg, true); !seen {
		fmt.Fprintln(os.Stderr, "\n*** "+msg+" — SKIPPING ***")
	}
	t.Skip("SKIPPED: " + msg)
}
