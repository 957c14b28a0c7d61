package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store/storeopen"
)

// Fair share, measured: the work of many accounts (Config.Accounts) and a
// small job behind another account's big one (RunSmall). A coordinator
// has no REST API for accounts yet, so both make their accounts and jobs
// in the coordinator's database (its --db, Config.SeedDB) through an
// engine of their own, as the accounts' requests would; the workers then
// drive the coordinator over REST as any other run's.

// seedAccounts makes c.Accounts accounts, named after workload, with
// weights c.Weights in turn, and c.JobsPerAccount jobs of each of
// workload, of n tasks in all shared by weight; it returns the account of
// each job and each account's weight.
func seedAccounts(ctx context.Context, c Config, workload string, n int) (owner map[string]string, weights map[string]int, err error) {
	if c.SeedDB == "" {
		return nil, nil, fmt.Errorf("--accounts makes accounts in the coordinator's database: give it with --seed-db")
	}
	eng, closeEng, err := seedEngine(ctx, c.SeedDB, c.Shard)
	if err != nil {
		return nil, nil, err
	}
	defer closeEng()
	total := 0
	for i := range c.Accounts {
		total += weightOf(c.Weights, i)
	}
	owner, weights = map[string]string{}, map[string]int{}
	for i := range c.Accounts {
		name := fmt.Sprintf("%s-%03d", workload, i)
		w := weightOf(c.Weights, i)
		if _, _, err := eng.CreateAccount(ctx, domain.Account{Name: name, Weight: w}); err != nil {
			return nil, nil, fmt.Errorf("seed account %s: %w", name, err)
		}
		weights[name] = w
		chunks := (n*w + total - 1) / total // what its share of the run takes, and a little more
		for j := range c.JobsPerAccount {
			k := chunks / c.JobsPerAccount
			if j < chunks%c.JobsPerAccount {
				k++
			}
			if k == 0 {
				continue
			}
			id, err := seedOwnedJob(ctx, eng, name, workload, k)
			if err != nil {
				return nil, nil, err
			}
			owner[id] = name
		}
	}
	return owner, weights, nil
}

func weightOf(weights []int, i int) int {
	if len(weights) == 0 {
		return 1
	}
	return weights[i%len(weights)]
}

// seedEngine opens the database at url with an engine of shard's, for
// making accounts and jobs in it.
func seedEngine(ctx context.Context, url, shard string) (*engine.Engine, func(), error) {
	st, err := storeopen.Open(ctx, url, storeopen.Options{Existing: true})
	if err != nil {
		return nil, nil, fmt.Errorf("open the coordinator's database to seed it: %w", err)
	}
	eng := engine.New(st, engine.Config{Shard: cmp.Or(shard, "s0"), Logger: slog.New(slog.DiscardHandler)})
	return eng, func() { st.Close() }, nil
}

// seedOwnedJob creates a job of n hosted chunks of workload as account's.
func seedOwnedJob(ctx context.Context, eng *engine.Engine, account, workload string, n int) (string, error) {
	chunks := make([]domain.ChunkRef, n)
	for i := range chunks {
		chunks[i] = domain.ChunkRef{URI: fmt.Sprintf("https://bench.invalid/%d", i), SHA256: strings.Repeat("0", 64)}
	}
	v, _, err := eng.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: account}), &domain.JobSpec{
		Name: "bench", Workload: workload, Parameters: json.RawMessage("{}"), Chunks: chunks,
		ChunkRows: 1, HasHeader: true, TopK: 1, ScoreColumn: "score", Order: domain.Desc,
		MaxAttempts: 3, LeaseSeconds: 600,
	}, "")
	if err != nil {
		return "", fmt.Errorf("seed a job of %s: %w", account, err)
	}
	return v.ID, nil
}

// reportShares writes how the lifecycles of the middle 80% of the run
// (by when they ended: all accounts still have work then) were shared
// between the accounts, against their weights.
func reportShares(out io.Writer, res result, owner map[string]string, weights map[string]int) {
	if len(res.samples) == 0 {
		return
	}
	first, last := res.samples[0].end, res.samples[0].end
	for _, s := range res.samples {
		if s.end.Before(first) {
			first = s.end
		}
		if s.end.After(last) {
			last = s.end
		}
	}
	span := last.Sub(first)
	from, to := first.Add(span/10), last.Add(-span/10)
	got := map[string]int{}
	all, totalWeight := 0, 0
	for _, s := range res.samples {
		if s.end.Before(from) || s.end.After(to) {
			continue
		}
		for _, j := range s.jobs {
			got[owner[j]]++
			all++
		}
	}
	names := make([]string, 0, len(weights))
	for name, w := range weights {
		names = append(names, name)
		totalWeight += w
	}
	slices.Sort(names)
	if all == 0 {
		return
	}
	// Each account's lifecycles over its fair share of them.
	ratio := func(name string) float64 {
		return float64(got[name]) / (float64(all) * float64(weights[name]) / float64(totalWeight))
	}
	if len(names) <= 4 {
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s (weight %d) %.1f%% = %.2f× its share", name, weights[name], 100*float64(got[name])/float64(all), ratio(name))
		}
		fmt.Fprintf(out, "shares of the middle 80%% (%d lifecycles): %s\n", all, strings.Join(parts, ", "))
		return
	}
	lo, hi := ratio(names[0]), ratio(names[0])
	for _, name := range names {
		lo, hi = min(lo, ratio(name)), max(hi, ratio(name))
	}
	fmt.Fprintf(out, "shares of the middle 80%% (%d lifecycles): every one of %d accounts took %.2f–%.2f× its share\n", all, len(names), lo, hi)
}

// SmallConfig says what RunSmall measures.
type SmallConfig struct {
	// Coordinator is the URL of a coordinator running in another
	// process; SeedDB its database, where the accounts and jobs are made.
	Coordinator, SeedDB string
	// WorkerToken and ClientToken are its tokens.
	WorkerToken, ClientToken string
	// Shard is its shard; "" means s0.
	Shard string
	// Workers hold each task for TaskTime; Big and Small are the jobs'
	// chunks, the small one created Delay after the big one.
	Workers     int
	TaskTime    time.Duration
	Big, Small  int
	Delay       time.Duration
	PollEvery   time.Duration // how often the small job's status is read; 0 means 20ms
	MaxDuration time.Duration // when to give up on the small job; 0 means 10 minutes
}

// RunSmall has one account submit a job of c.Big chunks, c.Workers workers
// work on it, holding each task c.TaskTime, and after c.Delay another
// account submits a job of c.Small chunks. It writes how long the small
// job took, from its creation until it was completed (stitched), against
// its own work (c.Small × c.TaskTime).
func RunSmall(ctx context.Context, out io.Writer, c SmallConfig) error {
	if c.Coordinator == "" || c.SeedDB == "" || c.Workers < 1 || c.Big < 1 || c.Small < 1 {
		return fmt.Errorf("need --coordinator, --seed-db, --workers ≥ 1 and jobs of at least one chunk")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eng, closeEng, err := seedEngine(ctx, c.SeedDB, c.Shard)
	if err != nil {
		return err
	}
	defer closeEng()
	workload := fmt.Sprintf("small-%x", time.Now().UnixNano())
	for _, a := range []string{workload + "-big", workload + "-small"} {
		if _, _, err := eng.CreateAccount(ctx, domain.Account{Name: a}); err != nil {
			return fmt.Errorf("seed account %s: %w", a, err)
		}
	}
	big, err := seedOwnedJob(ctx, eng, workload+"-big", workload, c.Big)
	if err != nil {
		return err
	}
	base := strings.TrimRight(c.Coordinator, "/")
	wc := client.New(base, c.WorkerToken, client.WithTimeout(0))
	defer wc.CloseIdleConnections()
	done := make(chan result, 1)
	go func() {
		// Until the run ends: a claim that finds nothing takes a turn too.
		done <- work(ctx, Config{Workers: c.Workers, Tasks: math.MaxInt32, Batch: 1}, func(id string, _ int) (lifecycle, error) {
			tasks, err := wc.ClaimMany(ctx, client.ClaimRequest{WorkerID: id, Workloads: []string{workload}, WaitSeconds: 1}, 1)
			if err != nil || len(tasks) == 0 {
				return lifecycle{}, err
			}
			t := tasks[0]
			select {
			case <-ctx.Done():
				return lifecycle{}, nil
			case <-time.After(c.TaskTime):
			}
			_, err = wc.Complete(context.WithoutCancel(ctx), t.TaskID, client.Result{WorkerID: id, Attempt: t.Attempt, Output: noopOutput})
			return lifecycle{end: time.Now(), tasks: 1, jobs: []string{t.JobID}}, err
		})
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.Delay):
	}
	submitted := time.Now()
	small, err := seedOwnedJob(ctx, eng, workload+"-small", workload, c.Small)
	if err != nil {
		return err
	}
	cl := client.New(base, c.ClientToken)
	defer cl.CloseIdleConnections()
	deadline := submitted.Add(cmp.Or(c.MaxDuration, 10*time.Minute))
	for {
		j, err := cl.GetJob(ctx, small)
		if err != nil {
			return err
		}
		if j.Status == client.JobCompleted {
			took := time.Since(submitted)
			own := time.Duration(c.Small) * c.TaskTime
			bj, err := cl.GetJob(ctx, big)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "workers %d, %v a task: a job of %d chunks created %v after another account's of %d completed in %v, %.2f× its own work (%v); "+
				"the big job was %d/%d done\n", c.Workers, c.TaskTime, c.Small, c.Delay, c.Big, took.Round(time.Millisecond),
				took.Seconds()/own.Seconds(), own, bj.Tasks.Completed, bj.Tasks.Total)
			break
		}
		if j.Final() || time.Now().After(deadline) {
			return fmt.Errorf("the small job is %s after %v", j.Status, time.Since(submitted).Round(time.Millisecond))
		}
		time.Sleep(cmp.Or(c.PollEvery, 20*time.Millisecond))
	}
	cancel()
	if res := <-done; res.err != nil && ctx.Err() == nil {
		return res.err
	}
	return nil
}
