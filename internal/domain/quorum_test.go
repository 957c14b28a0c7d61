package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReplicaID(t *testing.T) {
	id := ReplicaID("s0:abc-12", 3)
	if id != "s0:abc-12.r3" {
		t.Fatalf("ReplicaID = %q", id)
	}
	if c, ok := ReplicaOf(id); !ok || c != "s0:abc-12" {
		t.Errorf("ReplicaOf(%q) = %q, %v", id, c, ok)
	}
	for _, bad := range []string{"s0:abc-12", ".r1", "s0:a.rx", "s0:a.r"} {
		if c, ok := ReplicaOf(bad); ok {
			t.Errorf("ReplicaOf(%q) = %q, true; want false", bad, c)
		}
	}
}

func TestJobSpecWorkers(t *testing.T) {
	for _, tc := range []struct {
		workers WorkerMode
		quorum  int
		err     string // "" for valid
	}{
		{"", 0, ""},
		{WorkersOwn, 0, ""},
		{WorkersAny, 1, ""},
		{WorkersAny, 5, ""},
		{WorkersAny, 0, "quorum is 0"},
		{WorkersAny, 6, "quorum is 6"},
		{"", 2, "quorum applies only"},
		{WorkersOwn, 2, "quorum applies only"},
		{"everyone", 0, `workers "everyone"`},
	} {
		s := validSpec()
		s.Workers, s.Quorum = tc.workers, tc.quorum
		err := s.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("workers %q quorum %d: Validate() = %v; want %q", tc.workers, tc.quorum, err, tc.err)
		}
	}
}

func TestStartVote(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &Task{ID: "j-0", JobID: "j", Kind: KindChunk, State: TaskPending, Attempt: 1, MaxAttempts: 3,
		DownstreamID: "j-root", Result: []byte("old"), Version: 7}
	rs := StartVote(c, 2, "ada", now)
	if c.State != TaskLeased || c.LeaseOwner != QuorumLeaseOwner || c.Attempt != 3 || !c.LeaseLive(now.Add(1000*time.Hour)) {
		t.Errorf("chunk after StartVote: %+v", c)
	}
	if len(rs) != 2 {
		t.Fatalf("%d replicas; want 2", len(rs))
	}
	for i, r := range rs {
		want := ReplicaID("j-0", i+2) // attempt 1 was a trusted worker's
		if r.ID != want || r.Kind != KindReplica || r.State != TaskPending || r.Attempt != 0 || r.MaxAttempts != 1 ||
			r.DownstreamID != "" || r.Result != nil || r.Version != 7 || r.JobID != "j" || r.Voters != ",ada," {
			t.Errorf("replica %d: %+v; want ID %s, pending, no downstream, at the chunk's version", i, r, want)
		}
	}
	if len(c.Ballots) != 2 || c.Voters != "," {
		t.Errorf("chunk after StartVote has ballots %+v and voters %q; want 2 pending ballots, open to any account (\",\")", c.Ballots, c.Voters)
	}
	r, _ := BallotTask(c, 2)
	Lease(r, "ada/k@w", now)
	FoldBallot(c, r)
	if c.Voters != ",ada," {
		t.Errorf("chunk with a ballot leased by ada and one pending has voters %q; want \",ada,\"", c.Voters)
	}
	r, _ = BallotTask(c, 3)
	Lease(r, "bob/k@w", now)
	FoldBallot(c, r)
	if c.Voters != "" {
		t.Errorf("chunk with no pending ballot has voters %q; want none, closed to claims", c.Voters)
	}
}

func TestTally(t *testing.T) {
	done := func(owner, out string) *Task {
		return &Task{Kind: KindReplica, State: TaskCompleted, LeaseOwner: owner, Result: []byte(out)}
	}
	running := &Task{Kind: KindReplica, State: TaskLeased, LeaseOwner: "c/k@w"}
	pending := &Task{Kind: KindReplica, State: TaskPending}
	failed := &Task{Kind: KindReplica, State: TaskFailed, LeaseOwner: "c/k@w", Error: "exit 1"}
	for _, tc := range []struct {
		name     string
		quorum   int
		replicas []*Task
		accept   int // index of the replica accepted; -1 for none
		more     int
		fail     string
	}{
		{"two accounts agree", 2, []*Task{done("a/k@1", "x"), done("b/k@1", "x")}, 0, 0, ""},
		{"one account twice is one vote", 2, []*Task{done("a/k@1", "x"), done("a/k2@2", "x")}, -1, 1, ""},
		{"a trusted worker alone", 3, []*Task{done("a/k@1", "y"), done("pool-1", "x"), running}, 1, 0, ""},
		{"disagreement asks for another", 2, []*Task{done("a/k@1", "x"), done("b/k@1", "y")}, -1, 1, ""},
		{"a third account settles it", 2, []*Task{done("a/k@1", "x"), done("b/k@1", "y"), done("c/k@1", "y")}, 1, 0, ""},
		{"one still running: wait", 2, []*Task{done("a/k@1", "x"), running}, -1, 0, ""},
		{"a pending one counts as running", 3, []*Task{done("a/k@1", "x"), pending, running}, -1, 0, ""},
		{"budget spent: no quorum", 2, []*Task{done("a/k@1", "w"), done("b/k@1", "x"), done("c/k@1", "y"), done("d/k@1", "z")}, -1, 0, "no quorum: 4 results disagree"},
		{"budget spent but one running: wait", 2, []*Task{done("a/k@1", "w"), done("b/k@1", "x"), done("c/k@1", "y"), running}, -1, 0, ""},
		{"failures are replaced", 2, []*Task{done("a/k@1", "x"), failed}, -1, 1, ""},
		{"failures spend the attempts", 2, []*Task{done("a/k@1", "x"), failed, failed, failed}, -1, 0, `no quorum: 3 replicas failed, the last with "exit 1"; 1 results disagree`},
		{"quorum 3 needs two more", 3, []*Task{done("a/k@1", "x"), failed, failed}, -1, 2, ""},
		{"more stay within the results' budget", 3, []*Task{done("a/k@1", "x"), done("b/k@1", "y"), done("c/k@1", "z"), done("d/k@1", "x"), running}, -1, 0, ""},
		{"results past the budget", 3, []*Task{done("a/k@1", "x"), done("b/k@1", "y"), done("c/k@1", "z"), done("d/k@1", "x"), done("e/k@1", "w")}, -1, 0, "no quorum: 5 results disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Task{ID: "j-0", MaxAttempts: 3}
			pool := func(r *Task) bool { return !strings.Contains(r.LeaseOwner, "/") }
			v := Tally(c, tc.quorum, tc.replicas, pool)
			accepted := -1
			for i, r := range tc.replicas {
				if v.Accept == r {
					accepted = i
				}
			}
			if accepted != tc.accept || v.More != tc.more || v.Fail != tc.fail {
				t.Errorf("Tally = accept %d, more %d, fail %q; want accept %d, more %d, fail %q",
					accepted, v.More, v.Fail, tc.accept, tc.more, tc.fail)
			}
		})
	}
}

func TestOutvotedReplicaLosesItsLease(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Task{ID: "j-0.r1", Kind: KindReplica, State: TaskPending, LeaseSeconds: 60, MaxAttempts: 1}
	Lease(r, "a/k@w", now)
	if err := CheckLease(r, "a/k@w", 1, now); err != nil {
		t.Fatalf("CheckLease of a fresh lease: %v", err)
	}
	Outvote(r, now)
	if err := CheckLease(r, "a/k@w", 1, now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("CheckLease after Outvote = %v; want ErrLeaseLost", err)
	}
}
