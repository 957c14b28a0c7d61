package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// timed is leased(now), claimed at now with a 30 s timeout: its deadline
// is 30 s after its claim, and its 60 s lease was capped at it.
func timed(claimed time.Time) *Task {
	t := leased(claimed)
	t.TimeoutSeconds = 30
	t.AttemptDeadline = claimed.Add(30 * time.Second)
	t.LeaseExpiresAt = t.AttemptDeadline
	return t
}

func TestRenewCapsAtDeadline(t *testing.T) {
	t.Parallel()
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		deadline time.Duration // after the claim; 0 for none
		at       time.Duration // the renewal, after the claim
		want     time.Duration // the new expiry, after the claim
	}{
		{"no deadline", 0, 10 * time.Second, 70 * time.Second},
		{"deadline far off", time.Hour, 10 * time.Second, 70 * time.Second},
		{"deadline within the lease", 30 * time.Second, 10 * time.Second, 30 * time.Second},
		{"deadline just after the lease", 71 * time.Second, 10 * time.Second, 70 * time.Second},
		{"deadline at the lease's end", 70 * time.Second, 10 * time.Second, 70 * time.Second},
	}
	for _, tt := range tests {
		task := leased(claimed)
		if tt.deadline > 0 {
			task.AttemptDeadline = claimed.Add(tt.deadline)
		}
		Renew(task, claimed.Add(tt.at))
		if want := claimed.Add(tt.want); !task.LeaseExpiresAt.Equal(want) {
			t.Errorf("%s: lease expires %v after the claim, want %v", tt.name, task.LeaseExpiresAt.Sub(claimed), tt.want)
		}
	}
}

func TestCheckLeaseDeadline(t *testing.T) {
	t.Parallel()
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		mutate func(*Task)
		at     time.Duration // after the claim
		want   error
		msg    string // in the error
	}{
		{"before the deadline", func(*Task) {}, 29 * time.Second, nil, ""},
		{"at the deadline", func(*Task) {}, 30 * time.Second, ErrLeaseLost, "timed out after 30 s"},
		{"after the deadline", func(*Task) {}, time.Hour, ErrLeaseLost, "timed out after 30 s"},
		// Even a lease that somehow outlasts the deadline is lost at it.
		{"lease past the deadline", func(t *Task) { t.LeaseExpiresAt = claimed.Add(time.Hour) }, 31 * time.Second, ErrLeaseLost, "timed out"},
		{"another attempt after the deadline", func(t *Task) { t.Attempt = 3 }, time.Hour, ErrLeaseLost, "does not hold"},
		{"failed by the timeout", func(t *Task) { t.State = TaskFailed }, time.Hour, ErrCancelled, ""},
	}
	for _, tt := range tests {
		task := timed(claimed)
		tt.mutate(task)
		err := CheckLease(task, "w1", 2, claimed.Add(tt.at))
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) || (err != nil && !strings.Contains(err.Error(), tt.msg)) {
			t.Errorf("%s: CheckLease = %v, want %v saying %q", tt.name, err, tt.want, tt.msg)
		}
	}
}

func TestCheckLogWrite(t *testing.T) {
	t.Parallel()
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	completed := func(t *Task) { t.State, t.LeaseExpiresAt = TaskCompleted, time.Time{} }
	tests := []struct {
		name    string
		mutate  func(*Task)
		attempt int
		at      time.Duration // after the claim
		want    error
	}{
		{"live lease", func(*Task) {}, 2, 10 * time.Second, nil},
		{"live lease at the deadline", func(*Task) {}, 2, 30 * time.Second, ErrLeaseLost},
		{"own completion before the deadline", completed, 2, 10 * time.Second, nil},
		{"own completion at the deadline", completed, 2, 30 * time.Second, ErrLeaseLost},
		{"own completion without a deadline", func(t *Task) { completed(t); t.AttemptDeadline = time.Time{} }, 2, time.Hour, nil},
		{"another attempt's completion", completed, 1, 10 * time.Second, ErrLeaseLost},
		{"failed by its timeout", func(t *Task) { t.State = TaskFailed }, 2, 30 * time.Second, ErrCancelled},
		{"retried after its timeout", func(t *Task) { t.State = TaskPending }, 2, 30 * time.Second, ErrLeaseLost},
	}
	for _, tt := range tests {
		task := timed(claimed)
		tt.mutate(task)
		err := CheckLogWrite(task, "w1", tt.attempt, claimed.Add(tt.at))
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: CheckLogWrite = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestExpireLease(t *testing.T) {
	t.Parallel()
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const backoff = 3 * time.Second
	tests := []struct {
		name         string
		mutate       func(*Task)
		at           time.Duration // after the claim
		wantTimedOut bool
		wantState    TaskState
		wantError    string
		wantRunAfter time.Duration // after the claim, when pending
	}{
		{"deadline reached, attempts left", func(*Task) {}, 30 * time.Second, true, TaskPending, "timed out after 30 s", 33 * time.Second},
		{"deadline long past", func(*Task) {}, time.Hour, true, TaskPending, "timed out after 30 s", time.Hour + backoff},
		{"deadline reached, last attempt", func(t *Task) { t.MaxAttempts = 2 }, 30 * time.Second, true, TaskFailed, "timed out after 30 s", 0},
		{"lease ran out before the deadline", func(t *Task) { t.LeaseExpiresAt = claimed.Add(20 * time.Second) }, 25 * time.Second, false, TaskPending, "lease expired", 25 * time.Second},
		{"no timeout", func(t *Task) { t.AttemptDeadline, t.TimeoutSeconds = time.Time{}, 0 }, time.Hour, false, TaskPending, "lease expired", time.Hour},
		{"no timeout, last attempt", func(t *Task) { t.AttemptDeadline, t.MaxAttempts = time.Time{}, 2 }, time.Hour, false, TaskFailed, "lease expired", 0},
		// A stitch is the coordinators' work: its lease running out never
		// spends the job's attempts.
		{"stitch, last attempt", func(t *Task) { t.Kind, t.AttemptDeadline, t.MaxAttempts = KindStitch, time.Time{}, 2 }, time.Hour, false, TaskPending, "lease expired", time.Hour},
		{"stitch, attempts past max_attempts", func(t *Task) { t.Kind, t.AttemptDeadline, t.Attempt, t.MaxAttempts = KindStitch, time.Time{}, 7, 1 }, time.Minute, false, TaskPending, "lease expired", time.Minute},
	}
	for _, tt := range tests {
		task := timed(claimed)
		tt.mutate(task)
		now := claimed.Add(tt.at)
		timedOut, final := ExpireLease(task, "lease expired", backoff, now)
		if timedOut != tt.wantTimedOut || final != (tt.wantState == TaskFailed) || task.State != tt.wantState || task.Error != tt.wantError {
			t.Errorf("%s: ExpireLease = %v, %v; state %s, error %q; want %v, %v; %s, %q", tt.name, timedOut, final,
				task.State, task.Error, tt.wantTimedOut, tt.wantState == TaskFailed, tt.wantState, tt.wantError)
		}
		if !task.LeaseExpiresAt.IsZero() {
			t.Errorf("%s: the ended lease still expires at %v", tt.name, task.LeaseExpiresAt)
		}
		if tt.wantState == TaskPending && !task.RunAfter.Equal(claimed.Add(tt.wantRunAfter)) {
			t.Errorf("%s: runnable %v after the claim, want %v", tt.name, task.RunAfter.Sub(claimed), tt.wantRunAfter)
		}
	}
}
