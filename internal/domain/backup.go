package domain

import "time"

// Backups of stragglers. A chunk leased for much longer than its job's
// other chunks took may be leased a second time, to another worker,
// while its first attempt goes on (Speculate): the first result of
// either completes it, and the other attempt's calls get ErrLeaseLost.
//
// The task's lease fields hold one of the two attempts and Second the
// other. Focus swaps them before a write by the attempt in Second, so
// that the rules written for one lease (Renew, Complete, Retry, Release,
// ExpireLease) serve both; CheckLease accepts either. An attempt that
// ends without a result (a retryable failure, an expiry, a release)
// while the other is live leaves the task leased to the other (drop).

// Bounds of a job's speculate_after: a chunk gets a backup once leased
// for that many times the median time of its job's completed chunks.
const (
	DefaultSpeculateAfter = 3.0
	MinSpeculateAfter     = 1.0
	MaxSpeculateAfter     = 100.0
	// SpeculateMinCompleted is how many chunks of a job must have
	// completed before any of its chunks gets a backup: a median of
	// fewer says little.
	SpeculateMinCompleted = 5
)

// SecondLease is the other live attempt of a chunk leased twice.
type SecondLease struct {
	Owner     string
	Attempt   int
	LeasedAt  time.Time
	ExpiresAt time.Time
	Deadline  time.Time // the attempt's deadline; zero when none
}

// live reports whether s is a lease that has neither expired nor timed
// out at now.
func (s *SecondLease) live(now time.Time) bool {
	return s != nil && now.Before(s.ExpiresAt) && (s.Deadline.IsZero() || now.Before(s.Deadline))
}

// holds reports whether s is the lease of (worker, attempt).
func (s *SecondLease) holds(worker string, attempt int) bool {
	return s != nil && s.Owner == worker && s.Attempt == attempt
}

// CanSpeculate reports whether chunk t may be leased a second time to
// worker at now: its one lease is live and not worker's, an attempt is
// left for the backup, and it is not being voted on (its replicas are
// leased one by one, and its own lease is nobody's).
func CanSpeculate(t *Task, worker string, now time.Time) bool {
	return t.Kind == KindChunk && t.LeaseLive(now) && t.LeaseOwner != worker && t.LeaseOwner != QuorumLeaseOwner &&
		len(t.Ballots) == 0 && !t.Second.live(now) && t.attempts() < t.MaxAttempts
}

// attempts is how many attempts t has handed out: the highest number of
// its lease and its second's. A second lease that ended keeps its number
// taken, so that no later attempt of t has the fencing token of an
// earlier one.
func (t *Task) attempts() int {
	if t.Second != nil && t.Second.Attempt > t.Attempt {
		return t.Second.Attempt
	}
	return t.Attempt
}

// Speculate leases t a second time to worker at now (see CanSpeculate):
// the backup, the next attempt, takes t's lease fields, and the attempt
// that runs goes to Second.
func Speculate(t *Task, worker string, now time.Time) {
	first := current(t)
	Lease(t, worker, now)
	t.Second = first
}

// Focus makes (worker, attempt), when it is the live lease in t.Second
// of a leased t, the one in t's lease fields, and the other the second.
func Focus(t *Task, worker string, attempt int, now time.Time) {
	if t.State != TaskLeased || !t.Second.holds(worker, attempt) || !t.Second.live(now) {
		return
	}
	s := t.Second
	t.Second = current(t)
	t.LeaseOwner, t.Attempt, t.LeasedAt, t.LeaseExpiresAt, t.AttemptDeadline = s.Owner, s.Attempt, s.LeasedAt, s.ExpiresAt, s.Deadline
}

// current is the lease in t's lease fields as a SecondLease. It is always
// a new value: a task copied by value (a snapshot) shares Second.
func current(t *Task) *SecondLease {
	return &SecondLease{Owner: t.LeaseOwner, Attempt: t.Attempt, LeasedAt: t.LeasedAt, ExpiresAt: t.LeaseExpiresAt, Deadline: t.AttemptDeadline}
}

// drop ends the attempt in t's lease fields, over without a result for
// reason, when the attempt in t.Second is live at now: t stays leased,
// to that one, and the ended attempt stays in Second with no lease, its
// number taken. It reports whether it did.
func drop(t *Task, reason string, now time.Time) bool {
	s := t.Second
	if t.State != TaskLeased || !s.live(now) {
		return false
	}
	ended := current(t)
	ended.ExpiresAt, ended.Deadline = time.Time{}, time.Time{}
	t.LeaseOwner, t.Attempt, t.LeasedAt, t.LeaseExpiresAt, t.AttemptDeadline = s.Owner, s.Attempt, s.LeasedAt, s.ExpiresAt, s.Deadline
	t.Second = ended
	t.Error = reason
	t.UpdatedAt = now
	return true
}

// settle leaves t with no second lease, and its Attempt the highest it
// handed out: t is leased no more, and its next lease is numbered after
// every attempt before.
func settle(t *Task) {
	t.Attempt, t.Second = t.attempts(), nil
}

// SecondTask returns the attempt in t.Second as t would show it leased
// to that attempt, for charging its time; nil when t has no second
// lease, or one that ended (and was charged) already.
func SecondTask(t *Task) *Task {
	s := t.Second
	if s == nil || s.ExpiresAt.IsZero() {
		return nil
	}
	c := *t
	c.LeaseOwner, c.Attempt, c.LeasedAt, c.LeaseExpiresAt, c.AttemptDeadline, c.Second = s.Owner, s.Attempt, s.LeasedAt, s.ExpiresAt, s.Deadline, nil
	return &c
}
