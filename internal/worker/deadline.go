package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// A deadline (Config.Deadline, from --max-runtime or --until) is the end of
// a batch allocation: a Slurm or PBS walltime, a spot instance's notice.
// The worker claims only while at least a lease is left before it, and at
// it kills what still runs and releases it, so that another worker takes it
// at once and the attempt is not held against it. Release does the same
// before the deadline, when the allocation's owner warns (a signal).
//
// The length of a lease is the job's lease_seconds, which the worker learns
// from each claim (lease_expires_at against the coordinator's Date header).
// Before its first claim it assumes the shortest lease a job can have
// (domain.MinLeaseSeconds): assuming the default of 120 s would leave a
// short allocation idle even for jobs of short leases, while a task claimed
// with less than its lease left costs nothing but the work done on it — it
// is released at the deadline, and its attempt does not count.

// DefaultDeadlineLease is the lease length the worker assumes before its
// first claim, when it has a deadline.
const DefaultDeadlineLease = domain.MinLeaseSeconds * time.Second

// errDeadline is the cause of the end of the worker's claims, and then of
// its running tasks, at its deadline.
var errDeadline = errors.New("the worker's deadline came")

// errReleased is the cause of the same when Release was called.
var errReleased = errors.New("the worker was told to release its tasks")

// errNoLeaseLeft is the cause of the end of the worker's run when no slot
// will claim again before the deadline and nothing runs.
var errNoLeaseLeft = errors.New("less than a lease is left before the deadline")

// errGraceOver is the cause of killing the tasks still running at the end
// of the grace period of a shutdown.
var errGraceOver = errors.New("the grace period ran out")

// ending is what ends a worker's run besides its context: its deadline and
// Release.
type ending struct {
	deadline time.Time     // zero: none
	lease    atomic.Int64  // the lease length last seen, in nanoseconds
	release  chan struct{} // closed by Release
	once     sync.Once
}

func newEnding(deadline time.Time) *ending {
	e := &ending{deadline: deadline, release: make(chan struct{})}
	e.lease.Store(int64(DefaultDeadlineLease))
	return e
}

// sawLease records the length of a lease just granted, which ends at
// deadline.
func (e *ending) sawLease(deadline time.Time) {
	if d := time.Until(deadline); d > 0 {
		e.lease.Store(int64(d))
	}
}

// claimWindow says whether a claim may be made now, and how long it may
// wait for a task: until less than a lease would be left before the
// deadline. Without a deadline, any claim may be made, and wait long;
// after Release, none.
func (e *ending) claimWindow(wait time.Duration) (time.Duration, bool) {
	if e.released() {
		return 0, false
	}
	if e.deadline.IsZero() {
		return wait, true
	}
	left := time.Until(e.deadline) - time.Duration(e.lease.Load())
	if left <= 0 {
		return 0, false
	}
	return min(wait, left), true
}

// released reports whether Release was called.
func (e *ending) released() bool {
	select {
	case <-e.release:
		return true
	default:
		return false
	}
}

// timer returns a channel that receives at the deadline, nil (never)
// without one, and a function that stops it.
func (e *ending) timer() (<-chan time.Time, func()) {
	if e.deadline.IsZero() {
		return nil, func() {}
	}
	t := time.NewTimer(time.Until(e.deadline))
	return t.C, func() { t.Stop() }
}

// Release makes a running worker stop claiming, kill its running tasks at
// once and release them (pending again at once, the attempt not held
// against them), without waiting for a grace period, and return from Run —
// as at its deadline. It is for the warning that an allocation ends (Slurm's
// --signal, a spot instance's notice), also during a shutdown's grace
// period. It may be called from any goroutine, more than once, and before
// Run; a worker released before Run claims nothing.
func (w *Worker) Release() {
	w.ending.once.Do(func() { close(w.ending.release) })
}

// killsAtOnce reports whether cause, why claims ended, makes Run kill its
// running tasks at once, without a grace period.
func killsAtOnce(cause error) bool {
	return errors.Is(cause, errDeadline) || errors.Is(cause, errReleased)
}

// releaseReason is the error a task killed for cause is released with.
func (w *Worker) releaseReason(cause error) string {
	switch {
	case errors.Is(cause, errDeadline):
		return w.says("released the task at the worker's deadline (--max-runtime or --until) " + w.cfg.Deadline.UTC().Format(time.RFC3339))
	case errors.Is(cause, errReleased):
		return w.says("released the task when told to: the allocation it runs in ends")
	}
	return w.says("the worker was shutting down and killed the task when its " + w.cfg.Grace.String() + " grace period ran out")
}

// pause waits d or until ctx is done, but not past the moment claims stop
// before the deadline, so that a worker with nothing more to claim ends
// when it should.
func (w *Worker) pause(ctx context.Context, d time.Duration) {
	d, _ = w.ending.claimWindow(d) // 0 when no claim may come
	sleep(ctx, d)
}
