package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Untrusted workers (SPEC §10). A worker key that no admin trusts may run
// the chunks of jobs whose workers are "own" (its account's) or "any".
// It claims them apart from trusted workers (claimOpen), from the index
// of such tasks, in priority order, one transaction a claim.
//
// A chunk of an "any" job with a quorum above 1 that an untrusted worker
// takes is put to a vote (domain.StartVote): the chunk stays leased to
// no worker until its vote ends, and replicas of it (ballots in its
// row, shown as tasks of kind replica: ballotTx) are what workers run,
// each fenced by its own lease as any task is. A replica's worker is
// never of an account that already runs or ran another replica of the
// same chunk. Each replica that ends
// (a result, a failure, an expiry) tallies the vote in the same
// transaction (settleVote): the chunk takes the first output a quorum
// of accounts agrees on, and the replicas still running get 409; or it
// gets more replicas; or it fails. Since the chunk's row is written by
// every tally, with its version checked, two tallies never both accept.

// claimOpen is claimOnce for an untrusted worker of pr: it leases up to
// p.Max tasks open to it, at most one replica of each chunk. For a
// trusted worker it leases replicas alone: trusted claims take chunks
// the usual way. Untrusted claims of the same workloads that arrive
// together share one transaction whatever their accounts, a trusted
// account's its own (openClaimRun).
func (e *Engine) claimOpen(ctx context.Context, p ClaimTasksParams, pr domain.Principal) ([]*TaskView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.kind != "" && p.kind != domain.KindChunk {
		return nil, nil // tree tasks are for trusted workers
	}
	if pr.Trusted {
		// A trusted claim comes here whenever it found nothing else, at
		// every poll of an idle worker: a read outside any transaction
		// tells whether there is a replica to take before a write
		// transaction looks for one.
		peek, err := e.store.TaskListOpen(ctx, &store.TaskListOpenParams{Account: pr.Account, Workloads: p.Workloads, Limit: 1, BallotsOnly: true})
		if err != nil || len(peek) == 0 {
			return nil, mapStoreErr(err)
		}
	} else {
		e.sweepBeforeClaim(ctx) // a trusted claim swept already
	}
	// Untrusted claims of the same workloads share a run whatever their
	// accounts, so that two accounts' claims of one vote share a write;
	// a trusted worker's, which take ballots alone, run by account.
	key := "\x00" + strings.Join(p.Workloads, "\x00")
	if pr.Trusted {
		key = pr.Account + "\x00trusted" + key
	}
	a, err := e.openClaims.do(ctx, key, openClaimCall{worker: p.WorkerID, n: p.Max, pr: pr, workloads: p.Workloads}, p.Max)
	if err == nil {
		err = a.err
	}
	if err != nil {
		return nil, err
	}
	leased := a.tasks
	if len(leased) == 0 {
		return nil, nil
	}
	views, err := e.answerClaim(ctx, leased)
	if err != nil {
		return nil, err
	}
	e.jobChanged(leased...)
	for _, t := range leased {
		e.log.DebugContext(ctx, "task leased", "task_id", t.ID, "job_id", t.JobID, "worker_id", p.WorkerID, "attempt", t.Attempt)
	}
	return views, nil
}

// openClaimCall is one open claim of up to n tasks by worker (a lease
// owner) of pr, waiting to share a transaction with the others of the
// same workloads (and, for a trusted worker, of pr's account).
type openClaimCall struct {
	worker    string
	n         int
	pr        domain.Principal
	workloads []string
}

// openClaimRun serves open claims together, in one transaction, account
// by account in the order they came: for each it reads as many
// candidates as its callers ask for, and gives each caller its tasks in
// claim order, in the order the callers came. An account also finds the
// votes that accounts before it in the run started or joined, with a
// ballot still pending for it, and takes them before the others of their
// priority: two accounts' claims that arrive together lease both ballots
// of a quorum-2 chunk in one write of its row.
func (e *Engine) openClaimRun(ctx context.Context, calls []openClaimCall) []claimAnswer {
	out := make([]claimAnswer, len(calls))
	var accounts []string
	mine := map[string][]int{} // by account: its calls
	for i, c := range calls {
		if _, ok := mine[c.pr.Account]; !ok {
			accounts = append(accounts, c.pr.Account)
		}
		mine[c.pr.Account] = append(mine[c.pr.Account], i)
	}
	var leased []*domain.Task
	made := 0                       // pending replicas made, for other workers
	var voting, base map[string]int // by job: votes after this run, and before
	err := e.tx(ctx, func(q store.Querier) error {
		leased, made = leased[:0], 0
		base = map[string]int{}
		for i := range out {
			out[i].tasks = nil
		}
		now := e.now()
		var writes []*domain.Task // each chunk once
		written := map[string]bool{}
		left := map[string]int{}      // by owner with a max_running: the tasks it may still have leased
		capsRead := map[string]bool{} // the owners whose max_running was looked up
		voting = map[string]int{}     // by job: its chunks voted on, up to bound
		bound := e.maxVoting()
		for _, account := range accounts {
			idx := mine[account]
			pr := calls[idx[0]].pr
			caller := 0
			unfilled := func() bool {
				for caller < len(idx) && len(out[idx[caller]].tasks) == calls[idx[caller]].n {
					caller++
				}
				return caller < len(idx)
			}
			// The votes of this run with a ballot pending that this
			// account may take: their rows are not written yet.
			var open []*domain.Task
			for _, t := range writes {
				if t.Voters != "" && !strings.Contains(t.Voters, ","+account+",") {
					open = append(open, t)
				}
			}
			// It reads as many candidates as the callers want; when it
			// passes over some (a chunk of a job with as many votes as it
			// may have), it reads on past what it read, a few times at
			// most. What this run wrote is not read again.
			skip := slices.Collect(maps.Keys(written)) // every ID read
			for read := 0; read < 4 && unfilled(); read++ {
				limit := 0
				for k := caller; k < len(idx); k++ {
					limit += calls[idx[k]].n - len(out[idx[k]].tasks)
				}
				cands, err := q.TaskListOpen(ctx, &store.TaskListOpenParams{
					Account: account, Workloads: calls[0].workloads, Limit: limit, BallotsOnly: pr.Trusted, Skip: skip,
					SkipPendingOf: atCap(left),
				})
				if err != nil {
					return err
				}
				if err := e.runningLeft(ctx, q, cands, capsRead, left, now); err != nil {
					return err
				}
				full := len(cands) == limit
				if read == 0 && len(open) > 0 {
					// This run's votes first, within their priority:
					// their ballots are leased in one write and run at
					// once, where older votes would each be written again.
					cands = append(open, cands...)
					slices.SortStableFunc(cands, func(a, b *domain.Task) int { return b.Priority - a.Priority })
				}
				for _, t := range cands {
					if !written[t.ID] {
						skip = append(skip, t.ID) // read: the next read is past it
					}
					if !unfilled() {
						break
					}
					pending := t.State == domain.TaskPending // leased now, it counts against max_running
					if n, capped := left[t.Owner]; pending && capped && n <= 0 {
						continue // its owner has max_running tasks leased: they wait
					}
					var ballot *domain.Task // what the worker runs, when t is voted on
					switch {
					case t.State == domain.TaskLeased: // voted on, with a ballot pending
						var ok bool
						if ballot, ok = domain.PendingBallot(t); !ok {
							continue
						}
						if written[t.ID] {
							made-- // made in this run, and taken in it
						}
					case t.Workers == domain.WorkersAny:
						j, err := e.jobSettingsIn(ctx, q, t.JobID)
						if err != nil {
							return err
						}
						if j.Quorum <= 1 {
							break
						}
						n, ok := voting[t.JobID]
						if !ok {
							if n, ok = e.voting.get(t.JobID, now); !ok {
								if n, err = q.TaskCountVoting(ctx, t.JobID, bound); err != nil {
									return err
								}
								e.voting.set(t.JobID, n, now)
							}
							base[t.JobID], voting[t.JobID] = n, n
						}
						if n >= bound {
							continue // the votes under way first
						}
						voting[t.JobID] = n + 1
						ballot = domain.StartVote(t, j.Quorum, account, now)[0]
						made += j.Quorum - 1
					}
					if !written[t.ID] {
						written[t.ID] = true
						writes = append(writes, t)
					}
					if n, capped := left[t.Owner]; pending && capped {
						left[t.Owner] = n - 1
					}
					if ballot != nil {
						domain.Lease(ballot, calls[idx[caller]].worker, now)
						domain.FoldBallot(t, ballot)
						t = ballot
					} else {
						domain.Lease(t, calls[idx[caller]].worker, now)
					}
					out[idx[caller]].tasks = append(out[idx[caller]].tasks, t)
					leased = append(leased, t)
				}
				if !full {
					break // no more to read
				}
			}
		}
		if err := q.TaskUpdateMany(ctx, writes); err != nil {
			return err
		}
		return e.markRunning(ctx, q, leased, now)
	})
	if err != nil {
		for i := range out {
			out[i] = claimAnswer{err: fmt.Errorf("claim: %w", err)}
		}
		return out
	}
	for job, n := range voting {
		e.voting.add(job, n-base[job]) // the votes this run started
	}
	e.held.keep(e.now(), leased...)
	if made > 0 {
		e.notifyWork(domain.KindChunk, leased[0].Workload, made)
	}
	return out
}

// runningLeft adds to left how many more tasks the owners of the pending
// tasks of cands may have leased under their max_running, for the owners
// not in read yet, which it adds there; an owner without a max_running
// is left out of left, and so is every owner with fifo scheduling, which
// applies no max_running to any claim. The counts are taken under the
// locks a fair claim takes (store.Querier.TaskCountLeasedLocked), so that
// they hold until the transaction ends, whoever else claims the owners'
// tasks. A chunk being voted on counts once, however many of its ballots
// run.
func (e *Engine) runningLeft(ctx context.Context, q store.Querier, cands []*domain.Task, read map[string]bool, left map[string]int, now time.Time) error {
	if e.cfg.Scheduling == SchedulingFIFO {
		return nil
	}
	var capped []string
	for _, t := range cands {
		if t.State != domain.TaskPending || read[t.Owner] {
			continue
		}
		read[t.Owner] = true
		n, ok, gen := e.keys.maxRunning(t.Owner, now)
		if !ok {
			a, err := quotaAccount(ctx, q, t.Owner, false, func(a *domain.Account) bool { return a.MaxRunning > 0 })
			if err != nil {
				return err
			}
			if n = 0; a != nil {
				n = a.MaxRunning
			}
			e.keys.putMaxRunning(t.Owner, n, now, gen)
		}
		if n > 0 {
			left[t.Owner] = n
			capped = append(capped, t.Owner)
		}
	}
	if len(capped) == 0 {
		return nil
	}
	counts, err := q.TaskCountLeasedLocked(ctx, capped)
	if err != nil {
		return fmt.Errorf("count the leased tasks of the accounts with a max_running: %w", err)
	}
	for _, owner := range capped {
		left[owner] -= counts[owner]
	}
	return nil
}

// atCap returns the owners in left with no task left to lease, whose
// pending chunks a claim run's next reads pass over in the database.
func atCap(left map[string]int) []string {
	var out []string
	for owner, n := range left {
		if n <= 0 {
			out = append(out, owner)
		}
	}
	return out
}

// maxVoting bounds the chunks of a job voted on at once: twice the
// leases this process remembers handing out (held: the tasks its workers
// run at once, however they claim them, whether many workers, slots or
// batches), 64 at least. An
// account whose workers start votes faster than other accounts' settle
// them would otherwise pile up votes that wait for them, which its every
// claim passes over, and whose first replicas' work is lost if the
// others never come.
func (e *Engine) maxVoting() int {
	return max(64, 2*e.held.size())
}

// markRunning marks the pending jobs of tasks running at now. A job
// this process saw running is not read again: a job never goes back to
// pending but through a retry, which its next claim by a trusted worker
// marks running (an open claim may leave it pending until then).
func (e *Engine) markRunning(ctx context.Context, q store.Querier, tasks []*domain.Task, now time.Time) error {
	seen := map[string]bool{}
	for _, t := range tasks {
		if seen[t.JobID] || e.running.has(t.JobID) {
			continue
		}
		seen[t.JobID] = true
		j, err := q.JobGet(ctx, t.JobID)
		if err != nil {
			return err
		}
		if j.Status == domain.JobPending {
			j.Status, j.UpdatedAt = domain.JobRunning, now
			if err := q.JobUpdate(ctx, j); err != nil {
				return err
			}
		}
		if !j.Status.Final() {
			e.running.add(t.JobID)
		}
	}
	return nil
}

// runningJobs remembers the IDs of jobs seen running, up to
// runningJobsMax of them (then it starts over).
type runningJobs struct {
	mu  sync.Mutex
	ids map[string]bool
}

const runningJobsMax = 4096

func (r *runningJobs) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func (r *runningJobs) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil || len(r.ids) >= runningJobsMax {
		r.ids = map[string]bool{}
	}
	r.ids[id] = true
}

// votingCounts remembers, by job, how many of its chunks are voted on,
// so that a claim that would start a vote need not count them each time:
// a count read from the store serves for votingFresh, this process's
// votes started and ended in the meantime added to it. Other processes'
// show at the next read, so a job may pass maxVoting by as many as they
// start in that time.
type votingCounts struct {
	mu sync.Mutex
	m  map[string]votingCount
}

type votingCount struct {
	n    int
	read time.Time
}

const votingFresh = time.Second

// get returns the count of jobID's votes, and false when it was read
// votingFresh or longer before now, or never.
func (v *votingCounts) get(jobID string, now time.Time) (int, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.m[jobID]
	if !ok || now.Sub(c.read) >= votingFresh {
		return 0, false
	}
	return c.n, true
}

// set records n, the count of jobID's votes read at now.
func (v *votingCounts) set(jobID string, n int, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= runningJobsMax {
		v.m = map[string]votingCount{}
	}
	v.m[jobID] = votingCount{n: n, read: now}
}

// add adds d to the count of jobID's votes, if it has one.
func (v *votingCounts) add(jobID string, d int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.m[jobID]; ok {
		c.n = max(0, c.n+d)
		v.m[jobID] = c
	}
}

// lockVotes locks, in the transaction of q, the chunks of the replicas
// among ts, in one statement, before the replicas are written and their
// votes tallied, and returns the chunks and their replicas (their
// ballots, which the chunks' rows hold: ballotTx) by ID: tallies of one
// chunk take turns. Two replicas that ended
// at once in concurrent transactions would otherwise each read the other
// still running and both wait, for ever; and locking before the replicas
// are written keeps a tally that stops one of them from waiting for it
// while it waits for the chunk. A chunk's replicas are numbered from 1;
// it asks for a quorum past the highest of ts, which as a rule are all
// (tallyVotes reads any past them).
func (e *Engine) lockVotes(ctx context.Context, q store.Querier, ts ...*domain.Task) (map[string]*domain.Task, error) {
	var ids []string
	for _, t := range ts {
		chunkID, ok := domain.ReplicaOf(t.ID)
		if !ok || t.Kind != domain.KindReplica {
			continue
		}
		j, err := e.jobSettingsIn(ctx, q, t.JobID)
		if err != nil {
			return nil, err
		}
		ids = append(ids, chunkID)
		for n := range replicaNumber(t) + j.Quorum {
			ids = append(ids, domain.ReplicaID(chunkID, n+1))
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	got, err := q.TaskLockMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*domain.Task, len(got))
	for _, t := range got {
		out[t.ID] = t
	}
	return out, nil
}

// vote is what tallies decided: the chunks they complete, the replicas
// they stop and those they add, the chunks that fail their vote (and
// their jobs), and every task to write for it (writes).
type vote struct {
	accepted []*domain.Task
	stopped  []*domain.Task
	added    []*domain.Task
	failed   []*domain.Task
	writes   []*domain.Task
}

// settleVote settles the vote on the chunk of replica r, which just ended
// and is written (lockVotes locked its chunk before), in the transaction
// of q at now; trusted says whether r's worker is trusted.
func (e *Engine) settleVote(ctx context.Context, q store.Querier, r *domain.Task, trusted bool, now time.Time) error {
	locked, err := e.lockVotes(ctx, q, r) // held already: read again, r written
	if err != nil {
		return err
	}
	v, err := e.tallyVotes(ctx, q, locked, map[string]bool{r.ID: trusted}, map[string]*domain.Task{r.ID: r}, now)
	if err != nil {
		return err
	}
	if err := q.TaskUpdateMany(ctx, v.writes); err != nil {
		return err
	}
	return e.finishVotes(ctx, q, v, now)
}

// tallyVotes tallies the votes on the chunks of the replicas in ended,
// as lockVotes locked them (locked holds them and their replicas, by
// ID), in the transaction of q at now, and decides on each: it changes
// the tasks it decides on, but writes none (see vote.writes and
// finishVotes). ended holds the IDs of the replicas that just ended, true
// when the replica's worker is trusted (the pool's workers always are);
// fresh holds tasks changed in this transaction but not yet written,
// which stand in for what locked has of them. A chunk whose vote is over
// already (its job cancelled or failed) is left as it is.
func (e *Engine) tallyVotes(ctx context.Context, q store.Querier, locked map[string]*domain.Task, ended map[string]bool, fresh map[string]*domain.Task, now time.Time) (vote, error) {
	byChunk := map[string][]*domain.Task{}
	var missing []string // replicas lockVotes did not ask for
	for id := range ended {
		chunkID, _ := domain.ReplicaOf(id)
		c := locked[chunkID]
		if _, seen := byChunk[chunkID]; seen || c == nil || c.State != domain.TaskLeased || c.LeaseOwner != domain.QuorumLeaseOwner {
			continue
		}
		replicas := make([]*domain.Task, 0, c.Attempt)
		for n := range c.Attempt {
			rid := domain.ReplicaID(chunkID, n+1)
			r := fresh[rid]
			if r == nil {
				r = locked[rid]
			}
			if r == nil {
				missing = append(missing, rid)
				continue
			}
			replicas = append(replicas, r)
		}
		byChunk[chunkID] = replicas
	}
	if len(missing) > 0 {
		got, err := q.TaskGetMany(ctx, missing)
		if err != nil {
			return vote{}, err
		}
		for _, r := range got {
			chunkID, _ := domain.ReplicaOf(r.ID)
			byChunk[chunkID] = append(byChunk[chunkID], r)
		}
	}
	trusted := func(x *domain.Task) bool {
		return ended[x.ID] || !strings.Contains(x.LeaseOwner, "/") // the pool
	}
	var out vote
	for _, chunkID := range slices.Sorted(maps.Keys(byChunk)) {
		c, replicas := locked[chunkID], byChunk[chunkID]
		slices.SortFunc(replicas, func(a, b *domain.Task) int { return replicaNumber(a) - replicaNumber(b) })
		j, err := e.jobSettingsIn(ctx, q, c.JobID)
		if err != nil {
			return vote{}, err
		}
		v := domain.Tally(c, j.Quorum, replicas, trusted)
		switch {
		case v.Accept != nil:
			domain.Accept(c, v.Accept, now)
			for _, x := range replicas {
				if x.State == domain.TaskPending || x.State == domain.TaskLeased {
					endLease(q, x, now)
					domain.Outvote(x, now)
					out.stopped = append(out.stopped, x)
					out.writes = append(out.writes, x)
				}
			}
			out.writes = append(out.writes, c)
			out.accepted = append(out.accepted, c)
			e.log.InfoContext(ctx, "chunk accepted by vote", "task_id", c.ID, "job_id", c.JobID,
				"replica", v.Accept.ID, "replicas", len(replicas))
		case v.Fail != "":
			domain.Retry(c, v.Fail, false, 0, now)
			out.writes = append(out.writes, c)
			out.failed = append(out.failed, c)
			e.log.InfoContext(ctx, "chunk failed its vote", "task_id", c.ID, "job_id", c.JobID, "error", v.Fail)
		case v.More > 0:
			var voters []string
			for _, x := range replicas {
				if x.State == domain.TaskLeased || x.State == domain.TaskCompleted {
					voters = append(voters, domain.WorkerAccountOf(x.LeaseOwner))
				}
			}
			out.writes = append(out.writes, c)
			out.added = append(out.added, domain.AddBallots(c, v.More, domain.Voters(voters), now)...)
		}
	}
	return out, nil
}

// finishVotes acts on v, whose writes are written (the ballots added with
// their chunks), in the transaction of q at now: it fails the jobs of the
// chunks that failed their vote (which cancels their other tasks, so
// after those writes, which it would make stale).
func (e *Engine) finishVotes(ctx context.Context, q store.Querier, v vote, now time.Time) error {
	for _, c := range v.failed {
		if err := e.failJob(ctx, q, c, now); err != nil {
			return err
		}
	}
	return nil
}

// replicaNumber is n of a replica's ID (domain.ReplicaID).
func replicaNumber(t *domain.Task) int {
	_, n, _ := domain.BallotOf(t.ID)
	return n
}
