package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors of the domain rules. Transports map them to status codes in
// one place each; wrap them with fmt.Errorf("…: %w", err) to add detail.
var (
	// ErrInvalidArgument reports input that breaks a documented rule.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound reports a job or task that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict reports a write that contradicts what is already recorded:
	// an Idempotency-Key reused with another body, or a different result for
	// a completed task.
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost reports a worker write from someone who does not hold the
	// task's current lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrCancelled reports a worker write to a task of a cancelled or failed
	// job; the worker must stop working on it.
	ErrCancelled = errors.New("cancelled")
	// ErrNotReady reports a job result asked for before the job completed.
	ErrNotReady = errors.New("not ready")
	// ErrTooLarge reports a body or value over its size limit.
	ErrTooLarge = errors.New("too large")
	// ErrUnavailable reports a dependency, usually the database, that does not
	// answer; the caller may retry later.
	ErrUnavailable = errors.New("unavailable")
	// ErrBusy reports a process that holds its maximum of some waiting
	// call (long-polls, streams); the caller may retry shortly.
	ErrBusy = errors.New("busy")
	// ErrUnauthenticated reports a token that is no account's, revoked, or
	// of a disabled account.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied reports a caller that may not do what it asked:
	// a non-admin managing accounts.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrQuotaExceeded reports a request that would take an account past
	// one of its quotas; the message names the quota, its limit and the
	// current use.
	ErrQuotaExceeded = errors.New("quota exceeded")
)

// Invalidf returns an ErrInvalidArgument carrying a message for people.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
