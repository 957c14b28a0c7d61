package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/engine/enginetest"
	"github.com/scimesh/scimesh/internal/store"
)

// TestWorkersSeenAndPruned: a worker's claims and heartbeats are recorded
// for the dashboard, and a worker silent for a week is forgotten.
func TestWorkersSeenAndPruned(t *testing.T) {
	t.Parallel()
	c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEngine(openStore(t), engine.Config{Now: c.Now})
	ctx := t.Context()
	if _, _, err := e.CreateJob(ctx, spec(1), ""); err != nil {
		t.Fatal(err)
	}
	tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w1"})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	c.Advance(10 * time.Second)
	if _, err := e.RenewLease(ctx, tasks[0].ID, "w1", 1); err != nil {
		t.Fatal(err)
	}
	ws, _, err := e.ListWorkers(ctx, engine.ListWorkersParams{Within: time.Hour, Limit: 10, Tasks: true})
	if err != nil || len(ws) != 1 || ws[0].ID != "w1" || len(ws[0].Tasks) != 1 || ws[0].Tasks[0].ID != tasks[0].ID ||
		!ws[0].LastHeartbeat.Equal(c.Now()) {
		t.Fatalf("workers after a claim and a heartbeat: %+v, %v; want w1 holding its task, heartbeat now", ws, err)
	}
	if n, err := e.PruneWorkers(ctx); n != 0 || err != nil {
		t.Fatalf("pruned %d workers seen seconds ago (%v)", n, err)
	}
	c.Advance(8 * 24 * time.Hour)
	if n, err := e.PruneWorkers(ctx); n != 1 || err != nil {
		t.Fatalf("pruned %d workers silent for 8 days (%v), want 1", n, err)
	}
	if ws, _, _ := e.ListWorkers(ctx, engine.ListWorkersParams{}); len(ws) != 0 {
		t.Fatalf("a pruned worker is still listed: %+v", ws)
	}
}

// TestListWorkersOfKeys: a pool worker and the workers of two accounts'
// keys, each having claimed, are listed by their own IDs with their key's
// account, name and trust: an admin sees all three, an account its own
// alone, a page at a time; trusting a key shows at once, and a revoked
// key's worker stays listed, untrusted. The tasks a worker holds are shown
// to those who may see them.
func TestListWorkersOfKeys(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		c := enginetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		e := newEngine(s, engine.Config{Now: c.Now})
		ctx := t.Context()
		for _, name := range []string{"ada", "bob"} {
			if _, _, err := e.CreateAccount(ctx, domain.Account{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := e.CreateJob(ctx, spec(2), ""); err != nil { // the admin's
			t.Fatal(err)
		}
		keys := map[string]domain.Principal{"ada": {Account: "ada", Key: "laptop"}, "bob": {Account: "bob", Key: "desk"}}
		for account, p := range keys {
			if _, _, err := e.CreateWorkerKey(as(ctx, account), p.Key); err != nil {
				t.Fatal(err)
			}
		}
		claim := func(p domain.Principal, worker string) []*engine.TaskView {
			t.Helper()
			views, err := e.ClaimTasks(domain.WithPrincipal(ctx, p), engine.ClaimTasksParams{WorkerID: worker})
			if err != nil {
				t.Fatalf("claim of %s as %+v: %v", worker, p, err)
			}
			return views
		}
		if got := claim(domain.PoolPrincipal, "pool-1"); len(got) != 1 {
			t.Fatalf("the pool's claim: %d tasks, want 1", len(got))
		}
		c.Advance(time.Second)
		claim(keys["ada"], "ada-box")
		c.Advance(time.Second)
		claim(keys["bob"], "bob-box")

		list := func(ctx context.Context, p engine.ListWorkersParams) string {
			t.Helper()
			ws, next, err := e.ListWorkers(ctx, p)
			if err != nil {
				t.Fatalf("ListWorkers(%+v): %v", p, err)
			}
			var b strings.Builder
			for _, w := range ws {
				fmt.Fprintf(&b, "%s %q %q %t %d;", w.Name, w.Account, w.Key, w.Trusted, len(w.Tasks))
			}
			if next != "" {
				b.WriteString(" more")
			}
			return b.String()
		}
		check := func(what, got, want string) {
			t.Helper()
			if got != want {
				t.Errorf("%s:\n got %s\nwant %s", what, got, want)
			}
		}
		all := engine.ListWorkersParams{Tasks: true}
		check("the admin's list", list(ctx, all), `bob-box "bob" "desk" false 0;ada-box "ada" "laptop" false 0;pool-1 "" "" true 1;`)
		check("ada's list", list(as(ctx, "ada"), all), `ada-box "ada" "laptop" false 0;`)
		check("bob's list", list(as(ctx, "bob"), all), `bob-box "bob" "desk" false 0;`)

		// A page at a time, by the cursor.
		var pages []string
		p := engine.ListWorkersParams{Limit: 1}
		for range 4 {
			ws, next, err := e.ListWorkers(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				pages = append(pages, w.Name)
			}
			if next == "" {
				break
			}
			p.Cursor = next
		}
		check("the admin's pages of one", strings.Join(pages, ","), "bob-box,ada-box,pool-1")
		check("the first page of two", list(ctx, engine.ListWorkersParams{Limit: 2}), `bob-box "bob" "desk" false 0;ada-box "ada" "laptop" false 0; more`)
		check("those seen in the last 1.5 s", list(ctx, engine.ListWorkersParams{Within: 1500 * time.Millisecond}), `bob-box "bob" "desk" false 0;ada-box "ada" "laptop" false 0;`)
		for _, bad := range []engine.ListWorkersParams{{Limit: 1001}, {Limit: -1}, {Cursor: "not a cursor!"}} {
			if _, _, err := e.ListWorkers(ctx, bad); !errors.Is(err, domain.ErrInvalidArgument) {
				t.Errorf("ListWorkers(%+v): %v, want ErrInvalidArgument", bad, err)
			}
		}

		// Trusted, ada's worker runs the admin's task: the admin sees it
		// held, ada sees her worker but not the task, which is not hers.
		if _, err := e.TrustWorkerKey(ctx, "ada", "laptop", true); err != nil {
			t.Fatal(err)
		}
		c.Advance(10 * time.Second) // past the throttle of recorded calls
		trusted := keys["ada"]
		trusted.Trusted = true // as the gate authenticates the key now
		if got := claim(trusted, "ada-box"); len(got) != 1 {
			t.Fatalf("the trusted key's claim: %d tasks, want 1", len(got))
		}
		check("the admin's list after the trust", list(ctx, all), `ada-box "ada" "laptop" true 1;bob-box "bob" "desk" false 0;pool-1 "" "" true 1;`)
		check("ada's list after the trust", list(as(ctx, "ada"), all), `ada-box "ada" "laptop" true 0;`)

		if _, err := e.RevokeWorkerKey(as(ctx, "ada"), "laptop"); err != nil {
			t.Fatal(err)
		}
		check("ada's list after the revocation", list(as(ctx, "ada"), all), `ada-box "ada" "laptop" false 0;`)
		check("bob's list after ada's revocation", list(as(ctx, "bob"), all), `bob-box "bob" "desk" false 0;`)
	})
}
