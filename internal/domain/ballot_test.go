package domain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestBallotLifecycle: a vote's ballots, shown as replica tasks, go
// through the rules for replicas (Lease, Complete, Tally) and back into
// their chunk, which ends accepted with the agreed output; while the vote
// runs, the chunk's lease expires with its earliest leased ballot.
func TestBallotLifecycle(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &Task{ID: "j-0", JobID: "j", Kind: KindChunk, State: TaskPending, Attempt: 1, MaxAttempts: 3,
		LeaseSeconds: 60, DownstreamID: "j-root", Version: 7}
	c.State, c.LeaseOwner, c.LeaseExpiresAt = TaskLeased, QuorumLeaseOwner, voteLease
	rs := AddBallots(c, 2, Voters([]string{"ada"}), now)
	if len(rs) != 2 || rs[0].ID != "j-0.r2" || rs[1].ID != "j-0.r3" || c.Attempt != 3 {
		t.Fatalf("ballots %v, chunk attempt %d; want j-0.r2 and j-0.r3 after attempt 1, 3", ids(rs), c.Attempt)
	}
	for _, r := range rs {
		if r.Kind != KindReplica || r.State != TaskPending || r.MaxAttempts != 1 || r.DownstreamID != "" ||
			r.Voters != ",ada," || r.Version != 7 || r.Ballots != nil {
			t.Errorf("ballot shown as %+v; want a pending replica at the chunk's version", r)
		}
	}

	a, _ := BallotTask(c, 2)
	Lease(a, "ada/k@w1", now)
	FoldBallot(c, a)
	b, _ := BallotTask(c, 3)
	Lease(b, "bob/k@w2", now.Add(10*time.Second))
	FoldBallot(c, b)
	if want := now.Add(60 * time.Second); !c.LeaseExpiresAt.Equal(want) {
		t.Errorf("chunk's lease expires at %v with two ballots leased; want the earliest, %v", c.LeaseExpiresAt, want)
	}

	a, _ = BallotTask(c, 2)
	if _, err := Complete(a, "ada/k@w1", 1, []byte("x\n"), nil, now.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	FoldBallot(c, a)
	if want := now.Add(70 * time.Second); !c.LeaseExpiresAt.Equal(want) {
		t.Errorf("chunk's lease expires at %v with one ballot leased; want %v", c.LeaseExpiresAt, want)
	}
	b, _ = BallotTask(c, 3)
	if _, err := Complete(b, "bob/k@w2", 1, []byte("x\n"), nil, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	FoldBallot(c, b)

	var replicas []*Task
	for n := 2; n <= 3; n++ {
		r, _ := BallotTask(c, n)
		replicas = append(replicas, r)
	}
	v := Tally(c, 2, replicas, func(*Task) bool { return false })
	if v.Accept == nil || v.Accept.ID != "j-0.r2" {
		t.Fatalf("tally of two agreeing accounts: %+v; want j-0.r2 accepted", v)
	}
	Accept(c, v.Accept, now.Add(30*time.Second))
	if c.State != TaskCompleted || string(c.Result) != "x\n" || c.LeaseOwner != "ada/k@w1" {
		t.Errorf("chunk after its vote: %+v", c)
	}
}

// TestBallotRoundTrip: a ballot shown and folded back unchanged is
// unchanged, and a chunk shows no ballot it does not have.
func TestBallotRoundTrip(t *testing.T) {
	now := time.Unix(1000, 0).UTC()
	c := &Task{ID: "j-3", JobID: "j", Kind: KindChunk, State: TaskLeased, LeaseOwner: QuorumLeaseOwner,
		LeaseExpiresAt: voteLease, MaxAttempts: 2, LeaseSeconds: 30, TimeoutSeconds: 20}
	AddBallots(c, 2, "", now)
	r, _ := BallotTask(c, 1)
	Lease(r, "ada/k@w", now)
	r.Metrics = json.RawMessage(`{"rows":3}`)
	FoldBallot(c, r)
	before := append([]Ballot(nil), c.Ballots...)
	again, _ := BallotTask(c, 1)
	FoldBallot(c, again)
	if !reflect.DeepEqual(c.Ballots, before) {
		t.Errorf("ballots after a fold of what was shown:\n%+v\nwant\n%+v", c.Ballots, before)
	}
	if _, ok := BallotTask(c, 3); ok {
		t.Errorf("BallotTask(3) of a chunk with ballots 1 and 2 found one")
	}
}

func ids(ts []*Task) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID)
	}
	return strings.Join(s, ",")
}
