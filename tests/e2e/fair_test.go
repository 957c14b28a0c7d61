package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storeopen"
	"github.com/scimesh/scimesh/tests/framework/binary"
)

// Fair share with real processes: a coordinator, `scimesh worker`
// processes running a command that takes a while per chunk, and accounts
// whose jobs are submitted with their own tokens (`scimesh submit`). How
// many tasks each account has leased is sampled from the database while
// they run.

// fairSetup is a coordinator on a database of its own, with the store
// open beside it for making accounts and counting leases.
type fairSetup struct {
	dir, db string
	p       *binary.Proc
	st      store.Store
	eng     *engine.Engine
}

func newFairSetup(t *testing.T, pg bool, serveArgs ...string) *fairSetup {
	t.Helper()
	dir := t.TempDir()
	f := &fairSetup{dir: dir, db: newDB(t, dir, pg)}
	f.p = serveProc(t, dir, tokenEnv, append([]string{"--db", f.db, "--data-dir", filepath.Join(dir, "data")}, serveArgs...)...)
	st, err := storeopen.Open(t.Context(), f.db, storeopen.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.st, f.eng = st, engine.New(st, engine.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return f
}

// account makes an account and returns its token.
func (f *fairSetup) account(t *testing.T, a domain.Account) string {
	t.Helper()
	_, token, err := f.eng.CreateAccount(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// submit submits, with token, a job of chunks chunks of one row each of
// workload copy, and returns its ID.
func (f *fairSetup) submit(t *testing.T, token string, chunks int) string {
	t.Helper()
	table := filepath.Join(f.dir, fmt.Sprintf("table-%d.csv", chunks))
	var b strings.Builder
	b.WriteString("id,value\n")
	for i := range chunks {
		fmt.Fprintf(&b, "r%d,%d\n", i, i)
	}
	if err := os.WriteFile(table, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runStdout(t, f.dir, []string{"SCIMESH_COORDINATOR=" + f.p.URL, "SCIMESH_TOKEN=" + token},
		"submit", table, "--workload", "copy", "--top-k", "1", "--chunk-rows", "1")
	if err != nil {
		t.Fatalf("submit: %v %s", err, out)
	}
	return strings.TrimSpace(out)
}

// workers starts n worker processes of slots slots each, whose command
// takes per a chunk.
func (f *fairSetup) workers(t *testing.T, n, slots int, per time.Duration) {
	t.Helper()
	for i := range n {
		start(t, f.dir, workerEnv(f.p.URL), "worker", "--id", fmt.Sprintf("w%d", i), "--concurrency", fmt.Sprint(slots),
			"--work-dir", filepath.Join(f.dir, fmt.Sprintf("work%d", i)), "--workload", copyWorkload(fmt.Sprintf("sleep %.2f; ", per.Seconds())))
	}
}

// counts reads the chunk counts of jobs from the database.
func (f *fairSetup) counts(t *testing.T, jobs ...string) map[string]domain.TaskCounts {
	t.Helper()
	c, err := f.st.TaskCountByJob(context.WithoutCancel(t.Context()), jobs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sample reads the jobs' counts every 20 ms until done says so (or 3
// minutes passed: on a loaded machine a 0.1 s task has taken 6 s), and
// returns what it read.
func (f *fairSetup) sample(t *testing.T, jobs []string, done func(map[string]domain.TaskCounts) bool) []map[string]domain.TaskCounts {
	t.Helper()
	var out []map[string]domain.TaskCounts
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c := f.counts(t, jobs...)
		out = append(out, c)
		if done(c) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after 3 minutes; last counts %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFairShareWorkers: workers are shared by weight between two and
// between three accounts, each with a job queued before the workers
// start. While every account has chunks waiting and every slot is busy,
// each account's share of the leases, summed over the samples, is its
// weight's share within ±10%.
func TestFairShareWorkers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		weights []int
	}{{"weights 1 and 3", []int{1, 3}}, {"weights 1, 1 and 2", []int{1, 1, 2}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			onEachStore(t, func(t *testing.T, pg bool) {
				f := newFairSetup(t, pg)
				total := 0
				var jobs []string
				for i, w := range c.weights {
					token := f.account(t, domain.Account{Name: fmt.Sprintf("acct%d", i), Weight: w})
					jobs = append(jobs, f.submit(t, token, 20*w))
					total += w
				}
				const slots = 8 // 2 processes of 4
				f.workers(t, 2, 4, 100*time.Millisecond)
				samples := f.sample(t, jobs, func(c map[string]domain.TaskCounts) bool {
					for _, j := range jobs {
						if c[j].Pending == 0 {
							return true
						}
					}
					return false
				})
				leased := make([]int, len(jobs))
				all, busy := 0, 0
				for _, s := range samples {
					sum := 0
					for _, j := range jobs {
						sum += s[j].Leased
					}
					if sum < slots {
						continue // starting, or a slot between two tasks
					}
					busy++
					for i, j := range jobs {
						leased[i] += s[j].Leased
						all += s[j].Leased
					}
				}
				if busy < 10 {
					t.Fatalf("only %d samples of %d with every slot busy", busy, len(samples))
				}
				for i, w := range c.weights {
					share, want := float64(leased[i])/float64(all), float64(w)/float64(total)
					if share < want*0.9 || share > want*1.1 {
						t.Errorf("account %d (weight %d) held %.3f of the leases over %d samples; want %.3f ± 10%%", i, w, share, busy, want)
					}
				}
			})
		})
	}
}

// TestFairShareSmallJob: a 4-chunk job submitted by one account while
// another's 100-chunk job keeps every worker busy is done early, while
// most of the big job is still to do, not after it.
func TestFairShareSmallJob(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		f := newFairSetup(t, pg)
		big := f.submit(t, f.account(t, domain.Account{Name: "big"}), 100)
		small := f.account(t, domain.Account{Name: "small"})
		f.workers(t, 2, 2, 100*time.Millisecond)
		f.sample(t, []string{big}, func(c map[string]domain.TaskCounts) bool { return c[big].Completed >= 8 })
		job := f.submit(t, small, 4)
		submitted := time.Now()
		samples := f.sample(t, []string{big, job}, func(c map[string]domain.TaskCounts) bool { return c[job].Completed == 4 })
		took := time.Since(submitted)
		if done := samples[len(samples)-1][big].Completed; done > 50 {
			t.Errorf("the small job was done after %v, with %d of the big job's 100 chunks done; want it done early, while most were to do", took, done)
		}
		t.Logf("the small job's chunks were done %v after it was submitted", took)
	})
}

// TestFairShareMaxRunning: an account with max_running 2 never has more
// than 2 tasks leased, though workers are free; the other account's work
// takes the rest; and the capped account's job still completes.
func TestFairShareMaxRunning(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, pg bool) {
		f := newFairSetup(t, pg)
		capped := f.submit(t, f.account(t, domain.Account{Name: "capped", Weight: 10, MaxRunning: 2}), 16)
		free := f.submit(t, f.account(t, domain.Account{Name: "free"}), 16)
		f.workers(t, 2, 3, 100*time.Millisecond)
		most, others := 0, 0
		for _, s := range f.sample(t, []string{capped, free}, func(c map[string]domain.TaskCounts) bool { return c[capped].Completed == 16 }) {
			most = max(most, s[capped].Leased)
			others = max(others, s[free].Leased)
		}
		if most != 2 {
			t.Errorf("the capped account had at most %d tasks leased at once; want 2, its max_running", most)
		}
		if others < 3 {
			t.Errorf("the other account had at most %d tasks leased at once; want the free slots, 4", others)
		}
	})
}

// TestServeScheduling: serve refuses a scheduling it does not know, naming
// the flag and the variable, before it opens anything.
func TestServeScheduling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := run(t, dir, tokenEnv, "serve", "--scheduling", "lottery", "--db", "sqlite:"+filepath.Join(dir, "db"))
	if err == nil || !strings.Contains(out, `scheduling "lottery": use fair or fifo (--scheduling or SCIMESH_SCHEDULING)`) {
		t.Fatalf("serve --scheduling lottery: err %v, output:\n%s", err, out)
	}
	out, err = run(t, dir, append([]string{"SCIMESH_SCHEDULING=round-robin"}, tokenEnv...), "serve", "--db", "sqlite:"+filepath.Join(dir, "db"))
	if err == nil || !strings.Contains(out, `scheduling "round-robin"`) {
		t.Fatalf("SCIMESH_SCHEDULING=round-robin: err %v, output:\n%s", err, out)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "db")); statErr == nil {
		t.Error("the refused serve created its database")
	}
}
