package domain

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"
)

// Ballot is one replica of a chunk being voted on, kept in the chunk's
// own row (Task.Ballots) rather than in a row of its own: what a replica
// task holds that is not its chunk's. BallotTask shows ballot n as the
// replica task CHUNK.rN, and FoldBallot writes such a task back, so the
// rules for replicas (Lease, Complete, Retry, Renew, Outvote, Tally)
// serve ballots unchanged. A quorum-2 chunk then writes its one row four
// times (each ballot leased, each result) where replicas of their own
// wrote seven rows.
type Ballot struct {
	N               int // the replica's number: its ID is ReplicaID(chunk, N)
	State           TaskState
	Attempt         int
	LeaseOwner      string
	LeasedAt        time.Time
	LeaseExpiresAt  time.Time
	AttemptDeadline time.Time
	Voters          string
	Result          []byte
	Metrics         json.RawMessage
	Error           string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinishedAt      time.Time
}

// BallotTask returns ballot n of chunk c as the replica task it stands
// for, at c's version; false when c has no ballot n.
func BallotTask(c *Task, n int) (*Task, bool) {
	i := ballotIndex(c, n)
	if i < 0 {
		return nil, false
	}
	b := &c.Ballots[i]
	r := *c
	r.ID = ReplicaID(c.ID, n)
	r.Kind = KindReplica
	r.Ballots = nil
	r.MaxAttempts = 1   // a replica that fails is replaced, not retried
	r.DownstreamID = "" // its output flows to c, through the vote
	r.RunAfter = time.Time{}
	r.State, r.Attempt, r.LeaseOwner = b.State, b.Attempt, b.LeaseOwner
	r.LeasedAt, r.LeaseExpiresAt, r.AttemptDeadline = b.LeasedAt, b.LeaseExpiresAt, b.AttemptDeadline
	r.Voters, r.Result, r.Metrics, r.Error = b.Voters, b.Result, b.Metrics, b.Error
	r.CreatedAt, r.UpdatedAt, r.FinishedAt = b.CreatedAt, b.UpdatedAt, b.FinishedAt
	if c.State.Final() && (r.State == TaskPending || r.State == TaskLeased) {
		Outvote(&r, c.UpdatedAt) // the vote is over: accepted, failed or cancelled
	}
	return &r, true
}

// FoldBallot writes replica task r, shown by BallotTask from chunk c and
// changed since, back into c's ballot, and sets c's lease expiry to the
// earliest of its leased ballots' while c is being voted on, so that the
// reaper finds c when any of them expires (voteLease when none is).
func FoldBallot(c, r *Task) {
	chunkID, ok := ReplicaOf(r.ID)
	n := replicaN(r.ID, chunkID)
	i := ballotIndex(c, n)
	if !ok || chunkID != c.ID || i < 0 {
		panic("domain: folding " + r.ID + " into " + c.ID + ", which has no such ballot")
	}
	c.Ballots[i] = Ballot{N: n, State: r.State, Attempt: r.Attempt, LeaseOwner: r.LeaseOwner,
		LeasedAt: r.LeasedAt, LeaseExpiresAt: r.LeaseExpiresAt, AttemptDeadline: r.AttemptDeadline,
		Voters: r.Voters, Result: r.Result, Metrics: r.Metrics, Error: r.Error,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt}
	if r.UpdatedAt.After(c.UpdatedAt) {
		c.UpdatedAt = r.UpdatedAt
	}
	if c.State == TaskLeased && c.LeaseOwner == QuorumLeaseOwner {
		c.LeaseExpiresAt = voteLease
		for _, b := range c.Ballots {
			if b.State == TaskLeased && b.LeaseExpiresAt.Before(c.LeaseExpiresAt) {
				c.LeaseExpiresAt = b.LeaseExpiresAt
			}
		}
	}
	openBallots(c)
}

// openBallots sets c.Voters for the claims of untrusted workers: while c
// is being voted on and has a pending ballot, the accounts whose workers
// hold or completed one of its ballots (Voters), whom that ballot is not
// for; else "", and c is not open to them.
func openBallots(c *Task) {
	c.Voters = ""
	if c.State != TaskLeased || c.LeaseOwner != QuorumLeaseOwner {
		return
	}
	pending := false
	var accounts []string
	for _, b := range c.Ballots {
		switch b.State {
		case TaskPending:
			pending = true
		case TaskLeased, TaskCompleted:
			if a := WorkerAccountOf(b.LeaseOwner); !slices.Contains(accounts, a) {
				accounts = append(accounts, a)
			}
		}
	}
	if pending {
		c.Voters = cmp.Or(Voters(accounts), ",")
	}
}

// PendingBallot returns the replica task of c's first pending ballot;
// false when it has none.
func PendingBallot(c *Task) (*Task, bool) {
	for _, b := range c.Ballots {
		if b.State == TaskPending {
			return BallotTask(c, b.N)
		}
	}
	return nil, false
}

// AddBallots adds n pending ballots to chunk c at now, with voters (see
// Voters), and returns the replica tasks they stand for.
func AddBallots(c *Task, n int, voters string, now time.Time) []*Task {
	out := make([]*Task, n)
	for i := range out {
		c.Attempt++
		c.Ballots = append(c.Ballots, Ballot{N: c.Attempt, State: TaskPending, Voters: voters, CreatedAt: now, UpdatedAt: now})
		out[i], _ = BallotTask(c, c.Attempt)
	}
	c.UpdatedAt = now
	openBallots(c)
	return out
}

// ballotIndex is where ballot n is in c.Ballots, -1 when nowhere.
// Ballots are numbered on from the attempts the chunk had before its
// vote, in order.
func ballotIndex(c *Task, n int) int {
	if len(c.Ballots) == 0 {
		return -1
	}
	i := n - c.Ballots[0].N
	if i < 0 || i >= len(c.Ballots) || c.Ballots[i].N != n {
		return -1
	}
	return i
}

// replicaN is n of replica ID id of chunk chunkID (ReplicaID), 0 when id
// is not one.
func replicaN(id, chunkID string) int {
	if len(id) < len(chunkID)+3 {
		return 0
	}
	n := 0
	for _, d := range id[len(chunkID)+2:] {
		if d < '0' || d > '9' {
			return 0
		}
		n = n*10 + int(d-'0')
	}
	return n
}

// BallotOf returns the chunk and number of replica ID id (ReplicaID);
// false when id is no replica's.
func BallotOf(id string) (chunkID string, n int, ok bool) {
	chunkID, ok = ReplicaOf(id)
	if !ok {
		return "", 0, false
	}
	n = replicaN(id, chunkID)
	return chunkID, n, n > 0
}
