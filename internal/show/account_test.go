package show

import (
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

func TestAccount(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	a := &client.Account{Name: "alice", Weight: 2, MaxJobs: 3, MaxStorage: 10 << 30, CreatedAt: created, UpdatedAt: finished,
		Usage: &client.AccountUsage{Running: 4, Jobs: 1, StorageBytes: 1 << 20}}
	if err := Account(&b, a); err != nil {
		t.Fatal(err)
	}
	check(t, "an account with its use", b.String(), `name         alice
admin        no
disabled     no
weight       2
max_running  none (4 running now)
max_jobs     3 (1 unfinished now)
max_storage  10 GiB (1 MiB used now)
created      2026-03-01T12:00:00Z
updated      2026-03-01T12:01:30Z
`)
}

func TestAccounts(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := Accounts(&b, []*client.Account{
		{Name: "admin", Admin: true, Weight: 1, CreatedAt: created},
		{Name: "bob", Disabled: true, Weight: 3, MaxRunning: 8, MaxStorage: 500_000_000, CreatedAt: created},
	})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "two accounts", b.String(), `NAME   ADMIN  DISABLED  WEIGHT  MAX_RUNNING  MAX_JOBS  MAX_STORAGE  CREATED
admin  yes    no        1       none         none      none         2026-03-01T12:00:00Z
bob    no     yes       3       8            none      476.8 MiB    2026-03-01T12:00:00Z
`)
}
