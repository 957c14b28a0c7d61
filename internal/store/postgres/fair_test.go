package postgres_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/postgres"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// TestFairClaimAtScale puts the work of 100 accounts, and a backlog of
// finished tasks, in one database, and checks that the statements of a
// fair claim read the fair-share indexes (and the leased tasks' ones),
// never the table or an index in another order, under the custom and the
// generic plan: a fair claim costs a search per account and job with
// work, and a step per leased task, whatever the backlog.
func TestFairClaimAtScale(t *testing.T) {
	t.Parallel()
	s, url := openURL(t)
	ctx := t.Context()
	at := storetest.Epoch()
	if err := s.TaskInsert(ctx, backlog(100_000)); err != nil {
		t.Fatal(err)
	}
	for a := range 100 {
		for j := range 3 {
			job := storetest.NewJob(fmt.Sprintf("j%03d-%d", a, j), at.Add(time.Duration(j)*time.Second))
			job.Owner = fmt.Sprintf("acct%03d", a)
			tasks := storetest.NewTasks(job, 20)[1:]
			for i, tk := range tasks {
				tk.Owner = job.Owner
				if i < 2 {
					tk.State, tk.LeaseOwner, tk.LeaseExpiresAt = domain.TaskLeased, "w", at.Add(time.Hour)
				}
			}
			if err := s.TaskInsert(ctx, tasks); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	owners := []string{"acct001", "acct002"}
	created := []pgtype.Timestamptz{{Time: at, Valid: true}, {Time: at, Valid: true}}
	claim := []any{[]string{"w1", "w2"}, at.Add(time.Hour), "chunk", []string{"tanimoto"}, 0, owners, []int32{0, 0}, created,
		[]string{"j001-0", "j002-0"}, true}
	for _, c := range []struct {
		name, sql string
		indexes   []string
		args      []any
	}{
		{"accounts", postgres.SQLFairAccounts, []string{"tasks_fair"}, []any{"chunk"}},
		{"accounts of workloads", postgres.SQLFairAccountsWorkloads, []string{"tasks_fair_workload"}, []any{"chunk", []string{"tanimoto"}}},
		{"groups", postgres.SQLFairGroups, []string{"tasks_fair"}, []any{"chunk", owners, []int32{16, 16}, []string{}, 64}},
		{"groups of workloads", postgres.SQLFairGroupsWorkloads, []string{"tasks_fair_workload"}, []any{"chunk", owners, []int32{16, 16}, []string{"tanimoto"}, 64}},
		// Either partial index of leased tasks will do.
		{"counts", postgres.SQLFairCounts, []string{"tasks_leased|tasks_lease_expiry"}, nil},
		{"claim", postgres.SQLFairClaim, []string{"tasks_fair"}, append(append([]any{}, claim[:3]...), append([]any{[]string{}}, claim[4:]...)...)},
		{"claim of workloads", postgres.SQLFairClaimWorkloads, []string{"tasks_fair_workload"}, claim},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			nodes, plan := explain(t, conn, mode, c.sql, c.args...)
			used := map[string]bool{}
			for _, node := range nodes {
				rel, _ := node["Relation Name"].(string)
				index, _ := node["Index Name"].(string)
				switch {
				case rel == "tasks" && strings.Contains(fmt.Sprint(node["Node Type"]), "Seq Scan"),
					rel == "tasks" && node["Node Type"] == "Bitmap Heap Scan":
					t.Errorf("%s, %s: the plan scans the tasks table:\n%s", c.name, mode, plan)
				case index == "tasks_job" || index == "tasks_claim" || index == "tasks_claim_workload":
					t.Errorf("%s, %s: the plan reads %s, not in fair-share order:\n%s", c.name, mode, index, plan)
				}
				used[index] = true
			}
			for _, index := range c.indexes {
				if !slices.ContainsFunc(strings.Split(index, "|"), func(i string) bool { return used[i] }) {
					t.Errorf("%s, %s: the plan does not read %s:\n%s", c.name, mode, index, plan)
				}
			}
		}
	}
}

// TestFairClaimReplicas has three stores on one database, as three
// replicas of a coordinator, drain the work of four accounts with fair
// claims at once, each store with claimers of its own and what it
// remembers its own: every task is leased once, and the accounts with a
// max_running end at it, though claims of every replica wanted more.
func TestFairClaimReplicas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	first, url := openURL(t)
	at := storetest.Epoch()
	for a := range 4 {
		name := fmt.Sprintf("acct%d", a)
		if err := first.AccountInsert(ctx, &domain.Account{Name: name, Weight: 1 + a, MaxRunning: 5 * a, CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			job := storetest.NewJob(fmt.Sprintf("j%d-%d", a, j), at.Add(time.Duration(j)*time.Second))
			job.Owner = name
			tasks := storetest.NewTasks(job, 50)[1:]
			for _, tk := range tasks {
				tk.Owner = name
			}
			if err := first.TaskInsert(ctx, tasks); err != nil {
				t.Fatal(err)
			}
		}
	}
	replicas := []store.Store{first}
	for range 2 {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		replicas = append(replicas, s)
	}
	var (
		mu    sync.Mutex
		owner = map[string]string{}
		dupes []string
		errs  []error
		wg    sync.WaitGroup
	)
	for r, s := range replicas {
		for c := range 8 {
			wg.Go(func() {
				me := fmt.Sprintf("r%d-c%d", r, c)
				for empty := 0; empty < 3; {
					tasks, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{me}, 1+c%3),
						Kinds: []domain.TaskKind{domain.KindChunk}, Now: at.Add(time.Minute), Fair: true, WorkEpoch: 1})
					mu.Lock()
					switch {
					case errors.Is(err, store.ErrStale):
					case err != nil:
						errs = append(errs, err)
						empty = 3
					case len(tasks) == 0:
						empty++
					}
					for _, tk := range tasks {
						if prev, ok := owner[tk.ID]; ok {
							dupes = append(dupes, fmt.Sprintf("%s to %s and %s", tk.ID, prev, me))
						}
						owner[tk.ID] = tk.Owner
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(dupes) > 0 {
		t.Fatalf("tasks leased twice: %q", dupes)
	}
	byAccount := map[string]int{}
	for _, o := range owner {
		byAccount[o]++
	}
	want := map[string]int{"acct0": 150, "acct1": 5, "acct2": 10, "acct3": 15}
	if !maps.Equal(byAccount, want) {
		t.Errorf("tasks leased by account: %v, want %v (acct0 without a cap drained, the others at their max_running)", byAccount, want)
	}
}
