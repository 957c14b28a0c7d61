package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Error codes of the contract, as found in Error.Code.
const (
	CodeInvalidArgument  = "invalid_argument"
	CodeUnauthenticated  = "unauthenticated"
	CodePermissionDenied = "permission_denied"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeLeaseLost        = "lease_lost"
	CodeCancelled        = "cancelled"
	CodeNotReady         = "not_ready"
	CodeTooLarge         = "too_large"
	CodeQuotaExceeded    = "quota_exceeded"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Error is an answer of a server other than success: its HTTP status and
// the code and message of its {"error": {"code", "message"}} body. When the
// body is not of that shape (a proxy's error page, say), Code is derived
// from the status and Message holds the start of the body.
type Error struct {
	Status  int    // the HTTP status, such as 409
	Code    string // the contract's error code, such as "lease_lost"
	Message string // for people
	Op      string // the call that failed, such as "POST /tasks/claim"
}

// Error reads like "POST /tasks/claim: 401 unauthenticated: unknown token".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d %s", e.Status, e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// readError turns a failed answer into a *Error.
func readError(resp *http.Response, op string) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode, Op: op}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	e.Code = codeOfStatus(resp.StatusCode)
	if s := strings.TrimSpace(string(data)); s != "" {
		e.Message = strings.Trim(snippet(data), `"`)
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// codeOfStatus is the contract's code for a status, for answers without an
// error body.
func codeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return CodeUnavailable
	}
	if status >= 500 {
		return CodeInternal
	}
	return fmt.Sprintf("http_%d", status)
}

// AsError returns the *Error in err's chain, or nil when there is none.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// hasCode reports whether err is a *Error with code.
func hasCode(err error, code string) bool {
	e := AsError(err)
	return e != nil && e.Code == code
}

// IsLeaseLost reports whether err says the caller no longer holds the lease
// (409 lease_lost): the task is someone else's now, so stop working on it.
func IsLeaseLost(err error) bool { return hasCode(err, CodeLeaseLost) }

// IsCancelled reports whether err says the task's job is over (409
// cancelled): stop working on the task.
func IsCancelled(err error) bool { return hasCode(err, CodeCancelled) }

// IsConflict reports whether err says the call contradicts what is
// recorded (409 conflict): an Idempotency-Key reused with another body, a
// different result for a completed task, or a retry of a job that is not
// failed or cancelled.
func IsConflict(err error) bool { return hasCode(err, CodeConflict) }

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	e := AsError(err)
	return e != nil && e.Status == http.StatusNotFound
}

// IsNotReady reports whether err says the job's result is not there yet
// (409 not_ready).
func IsNotReady(err error) bool { return hasCode(err, CodeNotReady) }

// IsRetryable reports whether the same call may succeed later: the
// coordinator is unreachable or failing (network errors, 5xx), busy (429),
// or timed out (408). Answers that will not change by themselves (other 4xx,
// and an account's quota, 429 quota_exceeded) are not retryable, nor are
// errors of a context the caller cancelled or let expire.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if e := AsError(err); e != nil {
		if e.Code == CodeQuotaExceeded {
			return false
		}
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
	}
	var ne *networkError
	return errors.As(err, &ne)
}

// networkError is a call that got no complete answer while its caller still
// waited for one: the server is unreachable, the connection broke, or the
// client's own timeout (WithTimeout) ran out. Such calls are retryable.
type networkError struct {
	op  string
	err error
}

func (e *networkError) Error() string { return e.op + ": " + e.err.Error() }
func (e *networkError) Unwrap() error { return e.err }

// transportError wraps err, the failure of op to get an answer: as a
// networkError when the caller's ctx is still live, else as it is, so that
// a cancelled caller sees its own context's error.
func transportError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &networkError{op: op, err: err}
}
