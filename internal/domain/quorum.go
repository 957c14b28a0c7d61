package domain

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WorkerMode says which workers may run a job's chunks (SPEC §10).
type WorkerMode string

// The worker modes.
const (
	// WorkersTrusted: trusted workers only (the pool and trusted keys).
	WorkersTrusted WorkerMode = "trusted"
	// WorkersOwn: trusted workers and the keys of the job's owner.
	WorkersOwn WorkerMode = "own"
	// WorkersAny: any worker; an untrusted worker's output counts only
	// when a quorum of accounts agrees on it (Tally).
	WorkersAny WorkerMode = "any"
)

// Valid reports whether m is one of the worker modes.
func (m WorkerMode) Valid() bool {
	return m == WorkersTrusted || m == WorkersOwn || m == WorkersAny
}

// Bounds and default of a job's quorum.
const (
	DefaultQuorum        = 2
	MinQuorum, MaxQuorum = 1, 5
)

// KindReplica is one run of an "any" job's chunk by an untrusted worker:
// a chunk that such a worker takes is put to a vote (StartVote), and its
// replicas' outputs decide its result (Tally). A replica is kept as a
// ballot in its chunk's row (Ballot) and shown as a task of this kind
// (BallotTask).
const KindReplica TaskKind = "replica"

// QuorumLeaseOwner holds the lease of a chunk being voted on. It is no
// worker's ID (those have no parentheses), so no worker writes to the
// chunk itself: its workers write to its replicas, its ballots.
const QuorumLeaseOwner = "(quorum)"

// voteLease is how long a chunk being voted on stays leased: until its
// vote ends, which its replicas' own leases bound.
var voteLease = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ReplicaID is the ID of replica n (1, 2, …) of the chunk task chunkID.
func ReplicaID(chunkID string, n int) string { return chunkID + ".r" + strconv.Itoa(n) }

// ReplicaOf returns the chunk task a replica's ID belongs to.
func ReplicaOf(replicaID string) (chunkID string, ok bool) {
	i := strings.LastIndex(replicaID, ".r")
	if i <= 0 {
		return "", false
	}
	if _, err := strconv.Atoi(replicaID[i+2:]); err != nil {
		return "", false
	}
	return replicaID[:i], true
}

// StartVote puts chunk c of a job with quorum replicas to a vote at now,
// for a worker of account: c is held by QuorumLeaseOwner until the vote
// ends, and gets quorum pending ballots (AddBallots); the replica tasks
// they stand for are returned, the first for the worker to lease.
// c.Attempt counts the ballots made.
func StartVote(c *Task, quorum int, account string, now time.Time) []*Task {
	c.State = TaskLeased
	c.LeaseOwner = QuorumLeaseOwner
	c.LeaseExpiresAt = voteLease
	c.AttemptDeadline = time.Time{}
	c.LeasedAt = now
	c.RunAfter = time.Time{}
	c.UpdatedAt = now
	return AddBallots(c, quorum, Voters([]string{account}), now)
}

// Voters is the Voters of a replica whose chunk workers of accounts run
// or ran.
func Voters(accounts []string) string {
	if len(accounts) == 0 {
		return ""
	}
	return "," + strings.Join(accounts, ",") + ","
}

// Verdict is what Tally decides about a chunk being voted on.
type Verdict struct {
	Accept *Task  // the replica whose output the chunk takes; nil for none yet
	More   int    // replicas to add now
	Fail   string // when not empty, the chunk fails for good with this reason
}

// Tally decides about chunk c, of a job with quorum, from all its
// replicas; trusted tells a replica of a trusted worker. A completed
// replica's output is accepted when a trusted worker gave it, or workers
// of quorum distinct accounts gave the same bytes; the first such (in
// the order of replicas) wins. Else the chunk needs more replicas, as
// many as would reach a quorum with those still running, within two
// budgets: quorum + c.MaxAttempts - 1 results in all, and fewer than
// c.MaxAttempts replicas failed (an error or an expiry, as a chunk's
// attempts fail). With none running and none to add, it fails.
func Tally(c *Task, quorum int, replicas []*Task, trusted func(*Task) bool) Verdict {
	type group struct {
		first    *Task
		accounts map[string]bool
	}
	var groups []*group
	best, live, done, failed := 0, 0, 0, 0
	lastError := ""
	for _, r := range replicas {
		switch r.State {
		case TaskPending, TaskLeased:
			live++
			continue
		case TaskFailed:
			failed++
			lastError = r.Error
			continue
		case TaskCompleted:
		default:
			continue
		}
		done++
		if trusted(r) {
			return Verdict{Accept: r}
		}
		account := WorkerAccountOf(r.LeaseOwner)
		var g *group
		for _, x := range groups {
			if bytes.Equal(x.first.Result, r.Result) {
				g = x
				break
			}
		}
		if g == nil {
			g = &group{first: r, accounts: map[string]bool{}}
			groups = append(groups, g)
		}
		g.accounts[account] = true
		if len(g.accounts) >= quorum {
			return Verdict{Accept: g.first}
		}
		best = max(best, len(g.accounts))
	}
	more := max(0, min(quorum-best-live, quorum+c.MaxAttempts-1-done-live))
	if failed >= c.MaxAttempts {
		more = 0
	}
	switch {
	case live > 0 || more > 0:
		return Verdict{More: more}
	case failed >= c.MaxAttempts:
		return Verdict{Fail: fmt.Sprintf("no quorum: %d replicas failed, the last with %q; %d results disagree", failed, lastError, done)}
	}
	return Verdict{Fail: fmt.Sprintf("no quorum: %d results disagree", done)}
}

// Accept completes chunk c, being voted on, with the output of replica r
// at now.
func Accept(c, r *Task, now time.Time) {
	c.State = TaskCompleted
	c.Result = r.Result
	c.Metrics = r.Metrics
	c.Error = ""
	c.LeaseOwner = r.LeaseOwner
	c.LeaseExpiresAt = time.Time{}
	c.Voters = ""
	c.UpdatedAt = now
	c.FinishedAt = now
}

// Outvote stops replica r, still pending or running, because its chunk's
// vote ended at now; its worker's next write is ErrLeaseLost.
func Outvote(r *Task, now time.Time) {
	r.State = TaskCancelled
	r.Error = "the chunk's vote ended: another result was accepted or it failed"
	r.LeaseExpiresAt = time.Time{}
	r.UpdatedAt = now
	r.FinishedAt = now
}

// checkWorkers checks s's workers and quorum: a quorum only for "any".
func (s *JobSpec) checkWorkers() error {
	if s.Workers != "" && !s.Workers.Valid() {
		return Invalidf("workers %q must be \"trusted\", \"own\" or \"any\"", s.Workers)
	}
	if s.Workers != WorkersAny {
		if s.Quorum != 0 {
			return Invalidf("quorum applies only to jobs with workers \"any\"")
		}
		return nil
	}
	return inRange("quorum", s.Quorum, MinQuorum, MaxQuorum)
}

// ScoresRows reports whether a task of kind k scores rows of a job's
// table: a chunk, or a replica of one.
func (k TaskKind) ScoresRows() bool { return k == KindChunk || k == KindReplica }
