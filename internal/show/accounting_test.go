package show

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

func TestUsage(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	rows := []client.Usage{
		{Account: s("alice"), WorkerAccount: s(""), Tasks: 3, WorkerSeconds: 5400},
		{Account: s("alice"), WorkerAccount: s("bob"), Tasks: 1, WorkerSeconds: 1.25},
	}
	var b strings.Builder
	if err := Usage(&b, rows, "account, worker_account"); err != nil {
		t.Fatal(err)
	}
	check(t, "usage by account and worker account", b.String(), `ACCOUNT  WORKER_ACCOUNT  TASKS  WORKER_SECONDS  WORKER_HOURS
alice    (pool)          3      5400.0          1.50
alice    bob             1      1.2             0.00
TOTAL                    4      5401.2          1.50
`)
	// By account when by is empty; one row has no total; a field the
	// answer lacks is "-".
	b.Reset()
	if err := Usage(&b, []client.Usage{{Tasks: 2, WorkerSeconds: 7200}}, ""); err != nil {
		t.Fatal(err)
	}
	check(t, "one row by the default", b.String(), `ACCOUNT  TASKS  WORKER_SECONDS  WORKER_HOURS
-        2      7200.0          2.00
`)
}

func TestAudit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := Audit(&b, []client.AuditEntry{
		{Time: finished, Action: "retention", Target: "", Detail: "deleted 2 jobs"},
		{Time: created, Account: "admin", Action: "account.create", Target: "alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two entries", b.String(), `TIME                  ACCOUNT        ACTION          TARGET  DETAIL
2026-03-01T12:01:30Z  (coordinator)  retention               deleted 2 jobs
2026-03-01T12:00:00Z  admin          account.create  alice   
`)
}
