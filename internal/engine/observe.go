package engine

import (
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Observer is told what the engine did, for metrics. Its methods are
// called after the transaction that did it committed, from many goroutines
// at once, and must return quickly. Counts are of this process's work only.
type Observer interface {
	// Claimed reports one claim statement of tasks of kind: n tasks leased
	// (0 when none was runnable) in d, the time of the claim's transaction
	// alone, without any long-poll wait.
	Claimed(kind domain.TaskKind, n int, d time.Duration)
	// Completed reports n tasks of kind completed; replays are not counted.
	Completed(kind domain.TaskKind, n int)
	// Failed reports a failed attempt of a task of kind; final when the task
	// failed for good. Releases by workers shutting down are not failures;
	// attempts that reached their deadline (timed out) are.
	Failed(kind domain.TaskKind, final bool)
	// Expired reports an expired lease of a task of kind (not one that ran
	// out at its attempt's deadline: that is a failure); final when it
	// held the task's last attempt, so that the task failed for good.
	Expired(kind domain.TaskKind, final bool)
}

// nopObserver is the Observer of an engine configured without one.
type nopObserver struct{}

func (nopObserver) Claimed(domain.TaskKind, int, time.Duration) {}
func (nopObserver) Completed(domain.TaskKind, int)              {}
func (nopObserver) Failed(domain.TaskKind, bool)                {}
func (nopObserver) Expired(domain.TaskKind, bool)               {}
