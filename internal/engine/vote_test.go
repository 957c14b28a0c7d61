package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
)

// key is the context of a worker request with an untrusted key of account.
func key(ctx context.Context, account string) context.Context {
	return asWorker(ctx, domain.Principal{Account: account, Key: "k"})
}

// claimIDs claims up to max tasks for worker w in ctx and returns their IDs.
func claimIDs(t *testing.T, ctx context.Context, e *engine.Engine, w string, max int) []string {
	t.Helper()
	got, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: w, Max: max})
	if err != nil {
		t.Fatalf("claim by %s: %v", w, err)
	}
	var ids []string
	for _, v := range got {
		ids = append(ids, v.ID)
	}
	return ids
}

// anyJob creates a one-chunk job of carol's open to any worker.
func anyJob(t *testing.T, e *engine.Engine, quorum, maxAttempts int) *engine.JobView {
	t.Helper()
	return anyJobOf(t, e, 1, quorum, maxAttempts)
}

// anyJobOf creates a job of carol's of n chunks open to any worker.
func anyJobOf(t *testing.T, e *engine.Engine, n, quorum, maxAttempts int) *engine.JobView {
	t.Helper()
	sp := spec(n)
	sp.Workers, sp.Quorum, sp.MaxAttempts = domain.WorkersAny, quorum, maxAttempts
	j, _, err := e.CreateJob(as(t.Context(), "carol"), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// complete records out as the result of the last attempt of replica id by
// worker w of ctx.
func complete(ctx context.Context, e *engine.Engine, id, w, out string) error {
	v, err := e.GetTask(context.WithoutCancel(ctx), id)
	if err != nil {
		return err
	}
	_, err = e.CompleteTask(ctx, engine.CompleteTaskParams{TaskID: id, WorkerID: w, Attempt: v.Attempt,
		Output: fmt.Appendf(nil, "id,score\n%s,1\n", out)})
	return err
}

// TestWorkerModes: an untrusted key claims the chunks of "any" jobs and of
// its own account's "own" jobs, never of a "trusted" job or of another
// account's "own" job; a trusted key and the pool claim all of them. A
// chunk an untrusted key claims has its attempt's deadline, and its
// attempt is charged to the key's account.
func TestWorkerModes(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		jobs := map[string]string{} // job → name
		for _, j := range []struct {
			name, owner string
			workers     domain.WorkerMode
		}{{"trusted", "bob", ""}, {"own-bob", "bob", domain.WorkersOwn}, {"own-ada", "ada", domain.WorkersOwn}, {"any", "carol", domain.WorkersAny}} {
			sp := spec(2)
			sp.Workers, sp.TimeoutSeconds = j.workers, 600
			if j.workers == domain.WorkersAny {
				sp.Quorum = 1
			}
			v, _, err := e.CreateJob(as(ctx, j.owner), sp, "")
			if err != nil {
				t.Fatal(err)
			}
			jobs[v.ID] = j.name
		}
		jobsOf := func(ids []string) []string {
			var names []string
			for _, id := range ids {
				names = append(names, jobs[strings.TrimSuffix(strings.TrimSuffix(id, "-0"), "-1")])
			}
			slices.Sort(names)
			return slices.Compact(names)
		}
		adas := claimIDs(t, key(ctx, "ada"), e, "a", 100)
		if got := jobsOf(adas); !slices.Equal(got, []string{"any", "own-ada"}) {
			t.Errorf("ada's untrusted key claimed chunks of %v; want any and own-ada", got)
		}
		v, err := e.GetTask(ctx, adas[0])
		if err != nil || v.AttemptDeadline.IsZero() || v.LeasedAt.IsZero() {
			t.Fatalf("a chunk ada's key claimed: %+v, %v; want its deadline and lease time", v.Task, err)
		}
		if err := complete(key(ctx, "ada"), e, adas[0], "a", "x"); err != nil {
			t.Fatal(err)
		}
		usage, err := e.ListUsage(ctx, engine.ListUsageParams{By: []engine.UsageField{engine.UsageWorkerAccount}})
		if err != nil || len(usage) != 1 || usage[0].WorkerAccount != "ada" || usage[0].Tasks != 1 {
			t.Errorf("usage by worker account: %+v, %v; want ada's one attempt", usage, err)
		}
		if got := jobsOf(claimIDs(t, key(ctx, "bob"), e, "b", 100)); !slices.Equal(got, []string{"own-bob"}) {
			t.Errorf("bob's untrusted key claimed chunks of %v; want own-bob (ada holds the rest of what is open)", got)
		}
		trusted := asWorker(ctx, domain.Principal{Account: "dave", Key: "k", Trusted: true})
		if got := jobsOf(claimIDs(t, trusted, e, "d", 1)); !slices.Equal(got, []string{"trusted"}) {
			t.Errorf("a trusted key claimed chunks of %v; want the trusted job's", got)
		}
		if got := claimIDs(t, ctx, e, "pool", 100); len(got) != 1 {
			t.Errorf("the pool claimed %v; want the trusted job's last chunk", got)
		}
	})
}

// TestOpenClaimsMaxRunning: an account at its max_running gets no more
// tasks leased by untrusted workers either: a claim of 5 gets the 2 it
// may have, the next claim none (no error) until one of them ends, and a
// claim of one finds another account's job behind the capped one's many
// chunks. A chunk being voted on counts once: its other ballots still go
// out at the cap, and no new vote starts. With fifo scheduling, as for
// trusted claims, max_running does not apply.
func TestOpenClaimsMaxRunning(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		create := func(owner string, maxRunning, n, quorum int) string {
			if _, _, err := e.CreateAccount(ctx, domain.Account{Name: owner, MaxRunning: maxRunning}); err != nil {
				t.Fatal(err)
			}
			sp := spec(n)
			sp.Workers, sp.Quorum = domain.WorkersAny, quorum
			j, _, err := e.CreateJob(domain.WithCaller(ctx, domain.Caller{Account: owner}), sp, "")
			if err != nil {
				t.Fatal(err)
			}
			return j.ID
		}

		capped := create("capped", 2, 10, 1)
		got := claimIDs(t, key(ctx, "vol"), e, "v1", 5)
		if len(got) != 2 {
			t.Fatalf("a claim of 5 got %v; want the 2 of max_running", got)
		}
		if more := claimIDs(t, key(ctx, "vol"), e, "v2", 5); len(more) != 0 {
			t.Fatalf("a claim at the cap got %v; want none", more)
		}
		if err := complete(key(ctx, "vol"), e, got[0], "v1", "x"); err != nil {
			t.Fatal(err)
		}
		if more := claimIDs(t, key(ctx, "vol"), e, "v2", 5); len(more) != 1 {
			t.Fatalf("a claim after one lease ended got %v; want 1", more)
		}
		later := create("later", 0, 1, 1)
		if got := claimIDs(t, key(ctx, "vol"), e, "v3", 1); !slices.Equal(got, []string{later + "-0"}) {
			t.Fatalf("a claim of one at the cap got %v; want the later job's chunk behind the capped job's 7", got)
		}
		fifo := newEngine(s, engine.Config{Scheduling: engine.SchedulingFIFO})
		if got := claimIDs(t, key(ctx, "vol"), fifo, "v4", 5); len(got) != 5 || !strings.HasPrefix(got[0], capped+"-") {
			t.Fatalf("a claim of 5 with fifo scheduling got %v; want 5 of the capped job's chunks", got)
		}

		voted := create("voted", 1, 2, 2)
		if got := claimIDs(t, key(ctx, "ada"), e, "a1", 5); !slices.Equal(got, []string{voted + "-0.r1"}) {
			t.Fatalf("ada claims %v; want the first ballot of chunk 0 only", got)
		}
		if got := claimIDs(t, key(ctx, "bob"), e, "b1", 5); !slices.Equal(got, []string{voted + "-0.r2"}) {
			t.Fatalf("bob claims %v; want chunk 0's second ballot and no vote on chunk 1", got)
		}
	})
}

// TestQuorum: a chunk of an "any" job that an untrusted worker takes is
// voted on: its replicas go to workers of distinct accounts, two agreeing
// outputs complete it with that output and the job completes; a liar's
// output is outvoted by a third account; outputs that never agree fail
// the chunk and its job with "no quorum"; and a trusted worker settles a
// vote alone, the replica still running then losing its lease.
func TestQuorum(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})

		t.Run("agree", func(t *testing.T) {
			j := anyJob(t, e, 2, 1)
			chunk := j.ID + "-0"
			r1 := claimIDs(t, key(ctx, "ada"), e, "a1", 5)
			if !slices.Equal(r1, []string{chunk + ".r1"}) {
				t.Fatalf("ada claims %v; want replica 1 of %s", r1, chunk)
			}
			if got := claimIDs(t, key(ctx, "ada"), e, "a2", 5); len(got) != 0 {
				t.Errorf("ada's second worker claims %v; want nothing: her account runs this chunk", got)
			}
			if got := claimIDs(t, key(ctx, "bob"), e, "b1", 5); !slices.Equal(got, []string{chunk + ".r2"}) {
				t.Fatalf("bob claims %v; want replica 2", got)
			}
			v, err := e.GetTask(ctx, chunk)
			if err != nil || v.State != domain.TaskLeased || v.LeaseOwner != domain.QuorumLeaseOwner {
				t.Fatalf("the chunk while voted on: %+v, %v", v, err)
			}
			if err := complete(key(ctx, "ada"), e, chunk+".r1", "a1", "x"); err != nil {
				t.Fatal(err)
			}
			if v, _ := e.GetTask(ctx, chunk); v.State != domain.TaskLeased {
				t.Errorf("the chunk after one vote: %s; want leased still", v.State)
			}
			if err := complete(key(ctx, "bob"), e, chunk+".r2", "b1", "x"); err != nil {
				t.Fatal(err)
			}
			v, err = e.GetTask(ctx, chunk)
			if err != nil || v.State != domain.TaskCompleted || string(v.Result) != "id,score\nx,1\n" {
				t.Fatalf("the chunk after two agreeing votes: %+v, %v; want completed with x", v, err)
			}
			if n, err := e.StitchReadyJobs(ctx); err != nil || n != 1 {
				t.Fatalf("StitchReadyJobs = %d, %v", n, err)
			}
			if jv, err := e.GetJob(ctx, j.ID); err != nil || jv.Status != domain.JobCompleted {
				t.Errorf("the job: %+v, %v; want completed", jv, err)
			}
		})

		t.Run("liar outvoted", func(t *testing.T) {
			j := anyJob(t, e, 2, 2)
			chunk := j.ID + "-0"
			claimIDs(t, key(ctx, "ada"), e, "a1", 1)
			claimIDs(t, key(ctx, "liar"), e, "l1", 1)
			if err := complete(key(ctx, "liar"), e, chunk+".r2", "l1", "lie"); err != nil {
				t.Fatal(err)
			}
			if err := complete(key(ctx, "ada"), e, chunk+".r1", "a1", "x"); err != nil {
				t.Fatal(err)
			}
			if got := claimIDs(t, key(ctx, "liar"), e, "l2", 1); len(got) != 0 {
				t.Errorf("the liar's account claims %v again; want nothing", got)
			}
			if got := claimIDs(t, key(ctx, "bob"), e, "b1", 1); !slices.Equal(got, []string{chunk + ".r3"}) {
				t.Fatalf("bob claims %v; want replica 3", got)
			}
			if err := complete(key(ctx, "bob"), e, chunk+".r3", "b1", "x"); err != nil {
				t.Fatal(err)
			}
			if v, err := e.GetTask(ctx, chunk); err != nil || v.State != domain.TaskCompleted || !strings.Contains(string(v.Result), "x,1") {
				t.Fatalf("the chunk: %+v, %v; want completed with the honest output", v, err)
			}
		})

		t.Run("no quorum", func(t *testing.T) {
			j := anyJob(t, e, 2, 1)
			chunk := j.ID + "-0"
			claimIDs(t, key(ctx, "ada"), e, "a1", 1)
			claimIDs(t, key(ctx, "bob"), e, "b1", 1)
			if err := complete(key(ctx, "ada"), e, chunk+".r1", "a1", "x"); err != nil {
				t.Fatal(err)
			}
			if err := complete(key(ctx, "bob"), e, chunk+".r2", "b1", "y"); err != nil {
				t.Fatal(err)
			}
			jv, err := e.GetJob(ctx, j.ID)
			if err != nil || jv.Status != domain.JobFailed || !strings.Contains(jv.Error, "no quorum: 2 results disagree") {
				t.Fatalf("the job: %s %q, %v; want failed with no quorum", jv.Status, jv.Error, err)
			}
		})

		t.Run("revoked mid-replica", func(t *testing.T) {
			if _, _, err := e.CreateAccount(ctx, domain.Account{Name: "fay"}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.CreateWorkerKey(as(ctx, "fay"), "k"); err != nil {
				t.Fatal(err)
			}
			j := anyJob(t, e, 2, 1)
			chunk := j.ID + "-0"
			if got := claimIDs(t, key(ctx, "fay"), e, "f1", 1); !slices.Equal(got, []string{chunk + ".r1"}) {
				t.Fatalf("fay claims %v; want replica 1", got)
			}
			if n, err := e.RevokeWorkerKey(as(ctx, "fay"), "k"); err != nil || n != 1 {
				t.Fatalf("revoke fay/k: %d released, %v; want 1", n, err)
			}
			v, err := e.GetTask(ctx, chunk+".r1")
			if err != nil || v.State != domain.TaskPending || !strings.Contains(v.Error, "revoked") {
				t.Fatalf("the revoked key's replica: %+v, %v; want pending again, not failed", v.Task, err)
			}
			for _, a := range []string{"ada", "bob"} {
				ids := claimIDs(t, key(ctx, a), e, a, 1)
				if len(ids) != 1 {
					t.Fatalf("%s claims %v; want a replica", a, ids)
				}
				if err := complete(key(ctx, a), e, ids[0], a, "x"); err != nil {
					t.Fatal(err)
				}
			}
			if v, _ := e.GetTask(ctx, chunk); v.State != domain.TaskCompleted {
				t.Errorf("the chunk: %s; want completed by ada and bob", v.State)
			}
		})

		t.Run("failures replaced while one runs on", func(t *testing.T) {
			j := anyJob(t, e, 2, 10)
			chunk := j.ID + "-0"
			claimIDs(t, key(ctx, "ada"), e, "a1", 1)
			for i := range 6 {
				who := fmt.Sprintf("f%d", i)
				ids := claimIDs(t, key(ctx, who), e, who, 1)
				if len(ids) != 1 {
					t.Fatalf("%s claims %v; want a replica", who, ids)
				}
				if _, err := e.FailTask(key(ctx, who), engine.FailTaskParams{TaskID: ids[0], WorkerID: who, Attempt: 1, Error: "crashed"}); err != nil {
					t.Fatal(err)
				}
			}
			// Replica 1 runs on; 2 to 7 failed; 8 is pending.
			if err := complete(key(ctx, "ada"), e, chunk+".r1", "a1", "x"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.GetTask(ctx, chunk+".r9"); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("replica 9: %v; want none made, since replica 8 waits for a worker", err)
			}
			if got := claimIDs(t, key(ctx, "erin"), e, "e1", 1); !slices.Equal(got, []string{chunk + ".r8"}) {
				t.Fatalf("erin claims %v; want replica 8", got)
			}
			if err := complete(key(ctx, "erin"), e, chunk+".r8", "e1", "x"); err != nil {
				t.Fatal(err)
			}
			if v, _ := e.GetTask(ctx, chunk); v.State != domain.TaskCompleted {
				t.Errorf("the chunk: %s; want completed by ada and erin", v.State)
			}
		})

		t.Run("trusted settles", func(t *testing.T) {
			j := anyJob(t, e, 2, 1)
			chunk := j.ID + "-0"
			claimIDs(t, key(ctx, "ada"), e, "a1", 1)
			if got := claimIDs(t, ctx, e, "pool", 5); !slices.Equal(got, []string{chunk + ".r2"}) {
				t.Fatalf("the pool, with nothing else to do, claims %v; want replica 2", got)
			}
			if err := complete(ctx, e, chunk+".r2", "pool", "x"); err != nil {
				t.Fatal(err)
			}
			if v, _ := e.GetTask(ctx, chunk); v.State != domain.TaskCompleted {
				t.Fatalf("the chunk after the pool's output: %s; want completed", v.State)
			}
			err := complete(key(ctx, "ada"), e, chunk+".r1", "a1", "x")
			if !errors.Is(err, domain.ErrLeaseLost) {
				t.Errorf("ada's late result: %v; want ErrLeaseLost", err)
			}
			if _, err := e.RenewLease(key(ctx, "ada"), chunk+".r1", "a1", 1); !errors.Is(err, domain.ErrLeaseLost) {
				t.Errorf("ada's heartbeat: %v; want ErrLeaseLost", err)
			}
		})
	})
}

// TestQuorumRace: untrusted workers of eight accounts, two of them liars
// each in its own way, race on the replicas of a job's chunks; every
// chunk ends completed with the output of two accounts at least (two
// liars and two honest workers fit in the budget of four replicas).
func TestQuorumRace(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		j := anyJobOf(t, e, 20, 2, 3)
		var mu sync.Mutex
		given := map[string]map[string]string{} // chunk → account → output accepted from it
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				account := fmt.Sprintf("acct%d", w)
				c := key(ctx, account)
				for range 200 {
					got, err := e.ClaimTasks(c, engine.ClaimTasksParams{WorkerID: "w", Max: 1, Wait: 50 * time.Millisecond})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						jv, err := e.GetJob(ctx, j.ID)
						if err != nil {
							t.Error(err)
							return
						}
						if jv.Tasks.Pending+jv.Tasks.Leased == 0 {
							return
						}
						continue
					}
					r := got[0]
					out := "good"
					if w%4 == 0 { // a liar, in its own way
						out = "lie-" + account
					}
					chunk, _ := domain.ReplicaOf(r.ID)
					err = complete(c, e, r.ID, "w", out)
					if err != nil && !errors.Is(err, domain.ErrLeaseLost) && !errors.Is(err, domain.ErrCancelled) {
						t.Error(err)
					}
					if err == nil {
						mu.Lock()
						if given[chunk] == nil {
							given[chunk] = map[string]string{}
						}
						given[chunk][account] = out
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		tasks, _, err := e.ListTasks(ctx, engine.ListTasksParams{JobID: j.ID, Limit: 100})
		if err != nil || len(tasks) != 20 {
			t.Fatalf("the job's chunks: %d, %v", len(tasks), err)
		}
		for _, tv := range tasks {
			v, err := e.GetTask(ctx, tv.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch v.State {
			case domain.TaskCompleted:
				agree := 0
				for _, out := range given[v.ID] {
					if strings.Contains(string(v.Result), out+",1") {
						agree++
					}
				}
				if agree < 2 {
					t.Errorf("%s completed with %q, which %d account(s) gave: %v", v.ID, v.Result, agree, given[v.ID])
				}
			default:
				t.Errorf("%s is %s after every worker stopped", v.ID, v.State)
			}
		}
	})
}

// TestVotesAcrossCoordinators: two coordinators share a PostgreSQL
// database, and the two replicas of each chunk end at the same time, one
// on each; every chunk is accepted, none waits for ever on a vote whose
// two tallies each saw the other replica still running.
func TestVotesAcrossCoordinators(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a := newEngine(openPG(t, url), engine.Config{NodeID: "a"})
	b := newEngine(openPG(t, url), engine.Config{NodeID: "b"})
	ctx := t.Context()
	const chunks = 40
	sp := spec(chunks)
	sp.Workers, sp.Quorum = domain.WorkersAny, 2
	j, _, err := a.CreateJob(as(ctx, "carol"), sp, "")
	if err != nil {
		t.Fatal(err)
	}
	for range chunks {
		ra := claimIDs(t, key(ctx, "ada"), a, "a1", 1)
		rb := claimIDs(t, key(ctx, "bob"), b, "b1", 1)
		if len(ra) != 1 || len(rb) != 1 {
			t.Fatalf("claims: ada %v, bob %v; want a replica each", ra, rb)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := complete(key(ctx, "ada"), a, ra[0], "a1", "x"); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := complete(key(ctx, "bob"), b, rb[0], "b1", "x"); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
	}
	jv, err := a.GetJob(ctx, j.ID)
	if err != nil || jv.Tasks.Completed != chunks {
		t.Fatalf("job after every vote: %+v, %v; want %d chunks completed", jv.Tasks, err, chunks)
	}
}

// TestVotesBounded: an account's workers, holding few leases, start at
// most 64 votes of a job that no other account has caught up with; when
// a vote ends, they may start another.
func TestVotesBounded(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		anyJobOf(t, e, 100, 2, 3)
		var started []string
		for range 100 {
			r := claimIDs(t, key(ctx, "ada"), e, "a", 1)
			for _, id := range r {
				if err := complete(key(ctx, "ada"), e, id, "a", "x"); err != nil {
					t.Fatal(err)
				}
			}
			started = append(started, r...)
		}
		if len(started) != 64 {
			t.Fatalf("ada started %d votes; want 64 before another account catches up", len(started))
		}
		r := claimIDs(t, key(ctx, "bob"), e, "b", 1)
		if len(r) != 1 {
			t.Fatalf("bob claims %v; want a replica", r)
		}
		if err := complete(key(ctx, "bob"), e, r[0], "b", "x"); err != nil {
			t.Fatal(err)
		}
		if got := claimIDs(t, key(ctx, "ada"), e, "a", 1); len(got) != 1 {
			t.Errorf("ada claims %v once a vote ended; want a new one", got)
		}
	})
}

// TestVotesBoundedByLeases: the bound is twice the leases the coordinator
// holds, so workers that run many tasks at once are not held back by it:
// a worker holding 50 replicas may start 50 more votes, and once it let
// them all go, no more than the 64 of the floor.
func TestVotesBoundedByLeases(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		anyJobOf(t, e, 300, 2, 3)
		first := claimIDs(t, key(ctx, "ada"), e, "a", 50)
		second := claimIDs(t, key(ctx, "ada"), e, "a", 50)
		if len(first) != 50 || len(second) != 50 {
			t.Fatalf("ada's worker started %d, then %d votes; want 50 and 50 while it holds them", len(first), len(second))
		}
		for _, id := range append(first, second...) {
			if err := complete(key(ctx, "ada"), e, id, "a", "x"); err != nil {
				t.Fatal(err)
			}
		}
		if got := claimIDs(t, key(ctx, "ada"), e, "a", 50); len(got) != 0 {
			t.Errorf("ada claims %d with 100 votes waiting and no lease held; want none past 64", len(got))
		}
	})
}

// TestVotesOfOneBatch: the results of one batch that end votes on several
// chunks are tallied together, each chunk on its own: one completes,
// the other, whose results disagree, gets a replica for a third account.
func TestVotesOfOneBatch(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		j := anyJobOf(t, e, 2, 2, 2)
		c0, c1 := j.ID+"-0", j.ID+"-1"
		batch := func(account, w string, outs map[string]string) {
			t.Helper()
			var items []engine.CompleteTaskParams
			for id, out := range outs {
				items = append(items, engine.CompleteTaskParams{TaskID: id, WorkerID: w, Attempt: 1,
					Output: fmt.Appendf(nil, "id,score\n%s,1\n", out)})
			}
			for i, r := range e.CompleteTasks(key(ctx, account), items) {
				if r.Err != nil {
					t.Fatalf("%s's result for %s: %v", account, items[i].TaskID, r.Err)
				}
			}
		}
		if got, want := claimIDs(t, key(ctx, "ada"), e, "a", 2), []string{c0 + ".r1", c1 + ".r1"}; !slices.Equal(got, want) {
			t.Fatalf("ada claims %v; want %v", got, want)
		}
		if got, want := claimIDs(t, key(ctx, "bob"), e, "b", 2), []string{c0 + ".r2", c1 + ".r2"}; !slices.Equal(got, want) {
			t.Fatalf("bob claims %v; want %v", got, want)
		}
		batch("ada", "a", map[string]string{c0 + ".r1": "x", c1 + ".r1": "x"})
		batch("bob", "b", map[string]string{c0 + ".r2": "x", c1 + ".r2": "y"})
		if v, err := e.GetTask(ctx, c0); err != nil || v.State != domain.TaskCompleted || string(v.Result) != "id,score\nx,1\n" {
			t.Errorf("chunk 0: %+v, %v; want completed with x", v, err)
		}
		if v, err := e.GetTask(ctx, c1); err != nil || v.State != domain.TaskLeased || v.LeaseOwner != domain.QuorumLeaseOwner {
			t.Errorf("chunk 1: %+v, %v; want still voted on", v, err)
		}
		if got, want := claimIDs(t, key(ctx, "bob"), e, "b", 1), []string(nil); !slices.Equal(got, want) {
			t.Errorf("bob claims %v; want nothing: his account voted on chunk 1", got)
		}
		if got, want := claimIDs(t, key(ctx, "dan"), e, "d", 1), []string{c1 + ".r3"}; !slices.Equal(got, want) {
			t.Errorf("dan claims %v; want %v", got, want)
		}
	})
}

// TestClaimReadsPastPassedOver: a claim of several tasks that passes over
// a replica (its account took another of the same chunk in this claim)
// reads on, and gets as many tasks as it asked for.
func TestClaimReadsPastPassedOver(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		e := newEngine(s, engine.Config{})
		j := anyJobOf(t, e, 2, 3, spec(2).MaxAttempts)
		if got, want := claimIDs(t, key(ctx, "bob"), e, "b", 1), []string{j.ID + "-0.r1"}; !slices.Equal(got, want) {
			t.Fatalf("bob claims %v; want %v", got, want)
		}
		// Replicas 2 and 3 of chunk 0 come first; ada may run one of them.
		if got, want := claimIDs(t, key(ctx, "ada"), e, "a", 2), []string{j.ID + "-0.r2", j.ID + "-1.r1"}; !slices.Equal(got, want) {
			t.Errorf("ada claims %v; want %v", got, want)
		}
	})
}

// TestClaimsAcrossAccounts: the claims of three accounts that arrive
// together share a transaction: the first starts a vote, the second
// takes that vote's other ballot, in the same write of the chunk's row
// (its version moves on by one), and the third, with no ballot left for
// it there, starts the next vote.
func TestClaimsAcrossAccounts(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		e := newEngine(s, engine.Config{})
		j := anyJobOf(t, e, 3, 2, 3)
		before, err := s.TaskGet(t.Context(), j.ID+"-0")
		if err != nil {
			t.Fatal(err)
		}
		prs := []domain.Principal{{Account: "ada", Key: "k"}, {Account: "bob", Key: "k"}, {Account: "cy", Key: "k"}}
		got, err := e.ClaimOpenTogether(prs, []string{"a1", "b1", "c1"})
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{{j.ID + "-0.r1"}, {j.ID + "-0.r2"}, {j.ID + "-1.r1"}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("ada, bob and cy claim together %v; want %v", got, want)
		}
		after, err := s.TaskGet(t.Context(), j.ID+"-0")
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != before.Version+1 || after.Voters != "" || after.Ballots[1].LeaseOwner != "bob/k@b1" {
			t.Errorf("chunk 0 after the claims: version %d (was %d), voters %q, ballots %+v; want one write, both ballots leased",
				after.Version, before.Version, after.Voters, after.Ballots)
		}
	})
}

// TestClaimsPairNewVotes: an account whose claim shares a run with the
// claim that started a vote takes that vote's other ballot before an
// older vote of the same priority waiting for it, so that the new vote's
// ballots are leased in one write and run at once; a vote of a higher
// priority still comes first.
func TestClaimsPairNewVotes(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		e := newEngine(s, engine.Config{})
		j := anyJobOf(t, e, 3, 2, 3)
		cy, ada := domain.Principal{Account: "cy", Key: "k"}, domain.Principal{Account: "ada", Key: "k"}
		if got, err := e.ClaimOpenTogether([]domain.Principal{cy}, []string{"c1"}); err != nil || !slices.Equal(got[0], []string{j.ID + "-0.r1"}) {
			t.Fatalf("cy alone claims %v, %v; want chunk 0's first ballot", got, err)
		}
		before, err := s.TaskGet(t.Context(), j.ID+"-1")
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.ClaimOpenTogether([]domain.Principal{cy, ada}, []string{"c2", "a1"})
		if err != nil {
			t.Fatal(err)
		}
		if want := [][]string{{j.ID + "-1.r1"}, {j.ID + "-1.r2"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("cy and ada claim together %v; want both ballots of chunk 1, the vote started in the run", got)
		}
		after, err := s.TaskGet(t.Context(), j.ID+"-1")
		if err != nil {
			t.Fatal(err)
		}
		if after.Version != before.Version+1 {
			t.Errorf("chunk 1 written %d times by the run; want once", after.Version-before.Version)
		}

		// A job of a higher priority, with a vote waiting for ada: its
		// ballot comes before the one cy's claim starts in the run.
		sp := spec(1)
		sp.Workers, sp.Quorum, sp.MaxAttempts, sp.Priority = domain.WorkersAny, 2, 3, 5
		high, _, err := e.CreateJob(as(t.Context(), "carol"), sp, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.ClaimOpenTogether([]domain.Principal{cy}, []string{"c3"}); err != nil || !slices.Equal(got[0], []string{high.ID + "-0.r1"}) {
			t.Fatalf("cy alone claims %v, %v; want the urgent job's chunk", got, err)
		}
		got, err = e.ClaimOpenTogether([]domain.Principal{cy, ada}, []string{"c4", "a2"})
		if err != nil {
			t.Fatal(err)
		}
		if want := [][]string{{j.ID + "-2.r1"}, {high.ID + "-0.r2"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("cy and ada claim together %v; want %v", got, want)
		}
	})
}
