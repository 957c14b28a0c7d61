package domain

import (
	"errors"
	"testing"
	"time"
)

// straggler is a chunk leased at t0 to "slow" (attempt 1 of 3), with a
// backup leased to "fast" (attempt 2) a minute later.
func straggler(t0 time.Time) *Task {
	t := &Task{ID: "j:0", Kind: KindChunk, State: TaskPending, MaxAttempts: 3, LeaseSeconds: 120}
	Lease(t, "slow", t0)
	Speculate(t, "fast", t0.Add(time.Minute))
	return t
}

func TestSpeculate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	tk := straggler(t0)
	if tk.Attempt != 2 || tk.LeaseOwner != "fast" || tk.Second == nil || tk.Second.Owner != "slow" || tk.Second.Attempt != 1 {
		t.Fatalf("after Speculate: lease %s/%d, second %+v; want fast/2 and slow/1", tk.LeaseOwner, tk.Attempt, tk.Second)
	}
	for _, l := range []struct {
		worker  string
		attempt int
	}{{"slow", 1}, {"fast", 2}} {
		if err := CheckLease(tk, l.worker, l.attempt, now); err != nil {
			t.Errorf("CheckLease(%s, %d): %v, want nil", l.worker, l.attempt, err)
		}
	}
	if err := CheckLease(tk, "fast", 1, now); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("CheckLease of a mixed lease: %v, want ErrLeaseLost", err)
	}
	if CanSpeculate(tk, "third", now) {
		t.Error("CanSpeculate of a chunk leased twice, both live: true")
	}
	if CanSpeculate(&Task{Kind: KindChunk, State: TaskLeased, LeaseOwner: "w", Attempt: 3, MaxAttempts: 3, LeaseExpiresAt: now.Add(time.Minute)}, "x", now) {
		t.Error("CanSpeculate of a chunk on its last attempt: true")
	}
	voted := &Task{Kind: KindChunk, State: TaskLeased, LeaseOwner: QuorumLeaseOwner, Attempt: 1, MaxAttempts: 3, LeaseExpiresAt: now.Add(time.Minute),
		Ballots: []Ballot{{N: 1, State: TaskLeased, Attempt: 1, LeaseOwner: "k", LeaseExpiresAt: now.Add(time.Minute)}}}
	if CanSpeculate(voted, "x", now) {
		t.Error("CanSpeculate of a chunk being voted on: true")
	}
	if !CanSpeculate(&Task{Kind: KindChunk, State: TaskLeased, LeaseOwner: "w", Attempt: 1, MaxAttempts: 3, LeaseExpiresAt: now.Add(time.Minute)}, "x", now) {
		t.Error("CanSpeculate of a chunk leased once, live, to another worker: false")
	}

	// A heartbeat of the first attempt renews it, not the backup.
	Focus(tk, "slow", 1, now)
	Renew(tk, now)
	if tk.LeaseOwner != "slow" || !tk.LeaseExpiresAt.Equal(now.Add(120*time.Second)) || tk.Second.Owner != "fast" ||
		!tk.Second.ExpiresAt.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("after slow's heartbeat: lease %s until %v, second %+v", tk.LeaseOwner, tk.LeaseExpiresAt, tk.Second)
	}
}

// TestSpeculateFirstResultWins: either attempt's result completes the
// chunk; the other's, the same bytes or not, and its heartbeats, get
// ErrLeaseLost; the winner's replay is Replayed.
func TestSpeculateFirstResultWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	for _, c := range []struct {
		winner, loser   string
		wAttempt, lAttm int
	}{{"fast", "slow", 2, 1}, {"slow", "fast", 1, 2}} {
		tk := straggler(t0)
		if out, err := Complete(tk, c.winner, c.wAttempt, []byte("a"), nil, now); err != nil || out != Completed {
			t.Fatalf("%s's result: %v, %v", c.winner, out, err)
		}
		if out, err := Complete(tk, c.winner, c.wAttempt, []byte("a"), nil, now); err != nil || out != Replayed {
			t.Errorf("%s's replay: %v, %v; want Replayed", c.winner, out, err)
		}
		for _, output := range []string{"a", "b"} {
			if _, err := Complete(tk, c.loser, c.lAttm, []byte(output), nil, now); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("%s's result %q after %s's: %v, want ErrLeaseLost", c.loser, output, c.winner, err)
			}
		}
		if err := CheckLease(tk, c.loser, c.lAttm, now); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s's heartbeat after %s's result: %v, want ErrLeaseLost", c.loser, c.winner, err)
		}
		if tk.State != TaskCompleted || string(tk.Result) != "a" || tk.LeaseOwner != c.winner {
			t.Errorf("after %s won: %s, %q, owner %s", c.winner, tk.State, tk.Result, tk.LeaseOwner)
		}
	}
}

// TestSpeculateOneEnds: an attempt that fails, expires or is released
// while the other is live leaves the chunk leased to the other; when
// the other is gone too, the rules for one lease apply.
func TestSpeculateOneEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	ends := map[string]func(tk *Task, worker string, attempt int, now time.Time){
		"a retryable failure": func(tk *Task, w string, a int, now time.Time) {
			Focus(tk, w, a, now)
			Retry(tk, "exit 1", true, time.Second, now)
		},
		"a release": func(tk *Task, w string, a int, now time.Time) {
			Focus(tk, w, a, now)
			Release(tk, "shutting down", now)
		},
		"an expiry": func(tk *Task, w string, a int, now time.Time) {
			Focus(tk, w, a, now)
			ExpireLease(tk, "stopped heartbeating", time.Second, now)
		},
	}
	for what, end := range ends {
		tk := straggler(t0)
		end(tk, "slow", 1, now)
		if tk.State != TaskLeased || tk.LeaseOwner != "fast" || tk.Attempt != 2 || tk.Second == nil || tk.Second.live(now) {
			t.Errorf("%s of the first attempt: %s to %s/%d, second %+v; want leased to fast/2, the first ended", what, tk.State, tk.LeaseOwner, tk.Attempt, tk.Second)
		}
		if err := CheckLease(tk, "slow", 1, now); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s of the first attempt: its lease: %v, want ErrLeaseLost", what, err)
		}
		if err := CheckLease(tk, "fast", 2, now); err != nil {
			t.Errorf("%s of the first attempt: the backup's lease: %v", what, err)
		}
		end(tk, "fast", 2, now)
		if tk.State != TaskPending || tk.Second != nil {
			t.Errorf("%s of both attempts: %s, second %+v; want pending", what, tk.State, tk.Second)
		}
	}
	// The backup ends while the first attempt's lease has run out: the
	// chunk is pending again.
	tk := straggler(t0)
	Focus(tk, "fast", 2, t0.Add(100*time.Second))
	Retry(tk, "exit 1", true, 0, t0.Add(150*time.Second))
	if tk.State != TaskPending {
		t.Errorf("the backup failed after the first attempt's lease ran out: %s, want pending", tk.State)
	}
	// A failure for good fails the chunk whatever the other attempt does.
	tk = straggler(t0)
	Focus(tk, "slow", 1, now)
	if !Retry(tk, "bad line 3", false, 0, now) || tk.State != TaskFailed {
		t.Errorf("a failure for good of one attempt: %s, want failed", tk.State)
	}
	if err := CheckLease(tk, "fast", 2, now); !errors.Is(err, ErrCancelled) {
		t.Errorf("the other attempt after a failure for good: %v, want ErrCancelled", err)
	}
}

// TestSpeculateAttemptNumbers: no attempt of a chunk ever takes the
// number of one before it, and backups count against max_attempts.
func TestSpeculateAttemptNumbers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	failBoth := func(maxAttempts int) *Task {
		tk := straggler(t0)
		tk.MaxAttempts = maxAttempts
		Focus(tk, "fast", 2, now)
		Retry(tk, "exit 1", true, 0, now)
		Focus(tk, "slow", 1, now)
		Retry(tk, "exit 1", true, 0, now)
		return tk
	}
	if tk := failBoth(2); tk.State != TaskFailed || tk.Attempt != 2 {
		t.Errorf("max_attempts 2, the backup then the first failed: %s at attempt %d; want failed at 2", tk.State, tk.Attempt)
	}
	tk := failBoth(3)
	if tk.State != TaskPending || tk.Attempt != 2 || tk.Second != nil {
		t.Errorf("max_attempts 3, both failed: %s at attempt %d, second %+v; want pending at 2", tk.State, tk.Attempt, tk.Second)
	}
	Lease(tk, "fast", now)
	if tk.Attempt != 3 {
		t.Errorf("the lease after both failed: attempt %d, want 3", tk.Attempt)
	}
	// A backup whose lease ran out is followed by one numbered after it.
	tk = straggler(t0)
	tk.MaxAttempts = 4
	Focus(tk, "slow", 1, t0.Add(100*time.Second)) // the first attempt heartbeats: its lease runs to 220 s
	Renew(tk, t0.Add(100*time.Second))
	later := t0.Add(200 * time.Second) // the backup's, to 180 s, ran out
	if !CanSpeculate(tk, "fast", later) {
		t.Fatal("CanSpeculate after the backup's lease ran out: false")
	}
	Speculate(tk, "fast", later)
	if tk.Attempt != 3 || tk.Second.Owner != "slow" || tk.Second.Attempt != 1 {
		t.Errorf("the second backup: attempt %d, second %+v; want 3 and slow/1", tk.Attempt, tk.Second)
	}
	if err := CheckLease(tk, "fast", 2, later); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the lapsed backup's lease: %v, want ErrLeaseLost", err)
	}
}

// TestSpeculateReleaseHoldsNoAttempt: a released backup, like any
// release, is not held against the chunk: with max_attempts 2 the first
// attempt's retryable failure afterwards leaves the chunk pending, as it
// would have without the backup.
func TestSpeculateReleaseHoldsNoAttempt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	tk := straggler(t0)
	tk.MaxAttempts = 2
	Focus(tk, "fast", 2, now)
	Release(tk, "shutting down", now)
	if tk.State != TaskLeased || tk.LeaseOwner != "slow" || tk.MaxAttempts != 3 {
		t.Fatalf("after the backup's release: %s to %s, max_attempts %d; want leased to slow, max_attempts 3", tk.State, tk.LeaseOwner, tk.MaxAttempts)
	}
	Focus(tk, "slow", 1, now)
	if final := Retry(tk, "exit 1", true, 0, now); final || tk.State != TaskPending {
		t.Fatalf("the first attempt's retryable failure after the backup's release: %s (final %v), want pending", tk.State, final)
	}
	Lease(tk, "w", now)
	if tk.Attempt != 3 {
		t.Errorf("the next lease: attempt %d, want 3 (1 and 2 were taken)", tk.Attempt)
	}
}
