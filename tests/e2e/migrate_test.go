package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/sqlite"
	"github.com/scimesh/scimesh/internal/testenv"
)

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		dir := t.TempDir()
		db := newDB(t, dir, pg)
		if pg {
			// pgtest migrates; start from an empty schema.
			for i := 0; ; i++ {
				out, err := run(t, dir, nil, "migrate", "down", "--db", db)
				if err != nil {
					t.Fatalf("migrate down: %v\n%s", err, out)
				}
				if strings.Contains(out, "nothing to revert") {
					break
				}
				if i > 100 {
					t.Fatalf("migrate down still reverts after %d calls:\n%s", i+1, out)
				}
			}
		}
		ms, err := sqlite.Migrations()
		if pg {
			ms, err = postgres.Migrations()
		}
		if err != nil || len(ms) < 2 {
			t.Fatalf("migrations: %d, %v", len(ms), err)
		}
		// status lists every migration, each applied (up to n) or pending.
		status := func(n int) string {
			var b strings.Builder
			for i, m := range ms {
				state := "pending"
				if i < n {
					state = "applied"
				}
				fmt.Fprintf(&b, "%04d_%s\t%s\n", m.Version, m.Name, state)
			}
			return b.String()
		}
		var applied strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&applied, "applied %04d\n", m.Version)
		}
		last := len(ms) - 1
		steps := []struct {
			args []string
			want string
		}{
			{[]string{"migrate", "status"}, status(0)},
			{[]string{"migrate", "up"}, applied.String()},
			{[]string{"migrate", "status"}, status(len(ms))},
			{[]string{"migrate", "up"}, "nothing to apply"},
			{[]string{"migrate", "down"}, fmt.Sprintf("reverted %04d", ms[last].Version)},
			{[]string{"migrate", "status"}, status(last)},
		}
		for _, s := range steps {
			out, err := run(t, dir, []string{"DATABASE_URL=" + db}, s.args...)
			if err != nil || !strings.Contains(out, s.want) {
				t.Fatalf("scimesh %v: %v, output %q, want %q", s.args, err, out, s.want)
			}
		}
		for i := last - 1; i >= 0; i-- {
			want := fmt.Sprintf("reverted %04d", ms[i].Version)
			if out, err := run(t, dir, []string{"DATABASE_URL=" + db}, "migrate", "down"); err != nil || !strings.Contains(out, want) {
				t.Fatalf("migrate down: %v, output %q, want %q", err, out, want)
			}
		}
		if out, err := run(t, dir, []string{"DATABASE_URL=" + db}, "migrate", "down"); err != nil || !strings.Contains(out, "nothing to revert") {
			t.Fatalf("migrate down with nothing applied: %v, output %q", err, out)
		}
		if pg {
			out, err := run(t, dir, nil, "serve", "--db", db, "--addr", testenv.FreeAddr(t))
			if err == nil || !strings.Contains(out, "migrate up") {
				t.Fatalf("serve on an unmigrated PostgreSQL: %v\n%s", err, out)
			}
		}
		if out, err := run(t, dir, nil, "migrate", "sideways", "--db", db); err == nil || !strings.Contains(out, "up, down or status") {
			t.Fatalf("unknown action: %v %s", err, out)
		}
	})
}
