package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// errStalled cancels a download that delivered nothing for too long.
var errStalled = errors.New("the download stalled")

// verifier reads a task's input as it downloads and checks it against the
// task's sha256 and size. It remembers the first read error, so that a
// broken download is reported as such whoever was reading. A read that
// waits longer than idle for data cancels the download: a stalled
// connection must not hold a lease forever. The errors about a hosted
// input give a plain reason and keep what was seen for the worker's log
// (hiddenError). One goroutine reads at a time.
type verifier struct {
	r      io.Reader
	want   client.TaskInput
	hosted bool
	ctx    context.Context         // the download's
	cancel context.CancelCauseFunc // cancels the download
	idle   time.Duration
	max    int64 // bounds an input of unknown size (want.Bytes 0)
	timer  *time.Timer

	h   hash.Hash
	n   int64
	eof bool
	err error // the first read error, worded
}

// newVerifier reads r, the body of a download made with ctx, which cancel
// cancels; hosted says it is a hosted input. An input whose size want does
// not give may be max bytes long.
func newVerifier(ctx context.Context, cancel context.CancelCauseFunc, r io.Reader, want client.TaskInput, hosted bool, idle time.Duration, max int64) *verifier {
	v := &verifier{r: r, want: want, hosted: hosted, ctx: ctx, cancel: cancel, idle: idle, max: max, h: sha256.New()}
	v.timer = time.AfterFunc(time.Hour, func() {
		cancel(fmt.Errorf("%w: no data for %v", errStalled, idle))
	})
	v.timer.Stop()
	return v
}

func (v *verifier) Read(p []byte) (int, error) {
	switch {
	case v.err != nil:
		return 0, v.err
	case v.eof:
		return 0, io.EOF
	}
	v.timer.Reset(v.idle)
	n, err := v.r.Read(p)
	v.timer.Stop()
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case v.want.Bytes > 0 && v.n > v.want.Bytes:
		v.err = v.hide(errSizeDiffers, fmt.Errorf("the input is at least %d bytes; the task names %d: the chunk changed at its source, or the download is corrupt", v.n, v.want.Bytes))
		err = v.err
		v.cancel(v.err)
	case v.want.Bytes == 0 && v.n > v.max:
		v.err = Permanent(fmt.Errorf("the input is larger than %d bytes, the most this worker downloads for a chunk of unknown size: give the chunk's bytes in the job, or raise the worker's --max-input-bytes", v.max))
		err = v.err
		v.cancel(v.err)
	case err == io.EOF:
		v.eof = true
	case err != nil && v.ctx.Err() != nil:
		v.err = fmt.Errorf("download the input: %w", v.hide(errNotFetched, context.Cause(v.ctx)))
	case err != nil:
		v.err = fmt.Errorf("download the input: %w", v.hide(errNotFetched, err))
	}
	return n, err
}

// hide returns err, or for a hosted input err behind the plain reason.
func (v *verifier) hide(reason string, err error) error {
	if !v.hosted {
		return err
	}
	return &hiddenError{reason: reason, err: err}
}

// stop releases the stall timer.
func (v *verifier) stop() { v.timer.Stop() }

// failed returns the read error seen so far, if any.
func (v *verifier) failed() error { return v.err }

// finish reads the rest of the input and checks its size and sha256. An
// error means the input is not the task's: retrying may fix it.
func (v *verifier) finish() error {
	if _, err := io.Copy(io.Discard, v); err != nil {
		return v.err
	}
	if v.want.Bytes > 0 && v.n != v.want.Bytes {
		return v.hide(errSizeDiffers, fmt.Errorf("the input is %d bytes; the task names %d: the chunk changed at its source, or the download was cut", v.n, v.want.Bytes))
	}
	if v.want.SHA256 == "" {
		return nil
	}
	got := hex.EncodeToString(v.h.Sum(nil))
	if !strings.EqualFold(got, v.want.SHA256) {
		return v.hide(errSHA256Differs, fmt.Errorf("the input's sha256 is %s; the task names %s: the chunk changed at its source, or the download is corrupt", got, v.want.SHA256))
	}
	return nil
}

// The plain reasons of a hosted input's failures (see hiddenError).
const (
	errNotFetched    = "the hosted input could not be fetched (the worker's log says why)"
	errSizeDiffers   = "the hosted input's size is not the bytes the job names (the worker's log has what came)"
	errSHA256Differs = "the hosted input's sha256 does not match the job's (the worker's log has what came)"
	errHostRefused   = "the hosted input's host, or one it redirected to, is not allowed by this worker's --allow-input-host rules (the worker's log says which and why)"
)

// hiddenError is a failure of a hosted input, whose details stay in the
// worker's log: the task's error, which every client that may read the
// job sees, gives its plain reason alone. The observed sha256 and size
// of what came, or the error of a connection to an address the job
// named, would tell a client what the worker's network holds.
type hiddenError struct {
	reason string // for the task's error
	err    error  // the details, for the worker's log
}

func (e *hiddenError) Error() string { return e.reason }
func (e *hiddenError) Unwrap() error { return e.err }

// hideFetchError puts a failed fetch of a hosted input behind its plain
// reason; an error about the URL itself, found before any connection,
// stays as it is.
func hideFetchError(err error) error {
	var refused *hostRefusedError
	switch {
	case errors.As(err, &refused):
		return &hiddenError{reason: errHostRefused, err: err} // permanent, as err is
	case errors.Is(err, ErrPermanent):
		return err
	}
	return &hiddenError{reason: errNotFetched, err: err}
}
