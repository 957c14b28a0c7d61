package show

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

func TestWorkerKeys(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := WorkerKeys(&b, []*client.WorkerKey{{Account: "alice", Name: "laptop", CreatedAt: created}, {Account: "bob", Name: "gpu", Trusted: true, CreatedAt: created}})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two keys", b.String(), `ACCOUNT  NAME    TRUSTED  CREATED
alice    laptop  no       2026-03-01T12:00:00Z
bob      gpu     yes      2026-03-01T12:00:00Z
`)
	b.Reset()
	KeyTrust(&b, &client.WorkerKey{Account: "bob", Name: "gpu"})
	check(t, "a key's trust", b.String(), "worker key bob/gpu: trusted no\n")
}

// TestWorkers: the pool's workers show as account (pool) with no key,
// and a worker that names no workload as running any.
func TestWorkers(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := Workers(&b, []client.Worker{
		{ID: "node-1", Trusted: true, LastSeen: created, TasksDone: 12},
		{ID: "lap", Account: "alice", Key: "laptop", Workloads: []string{"rank", "dock"}, LastSeen: finished},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two workers", b.String(), `ID      ACCOUNT  KEY     TRUSTED  WORKLOADS  LAST SEEN             TASKS DONE
node-1  (pool)   -       yes      any        2026-03-01T12:00:00Z  12
lap     alice    laptop  no       rank,dock  2026-03-01T12:01:30Z  0
`)
}
