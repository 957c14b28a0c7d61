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
// connection must not hold a lease forever. One goroutine reads at a time.
type verifier struct {
	r      io.Reader
	want   client.TaskInput
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
// cancels. An input whose size want does not give may be max bytes long.
func newVerifier(ctx context.Context, cancel context.CancelCauseFunc, r io.Reader, want client.TaskInput, idle time.Duration, max int64) *verifier {
	v := &verifier{r: r, want: want, ctx: ctx, cancel: cancel, idle: idle, max: max, h: sha256.New()}
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
		v.err = fmt.Errorf("the input is at least %d bytes; the task names %d: the chunk changed at its source, or the download is corrupt", v.n, v.want.Bytes)
		err = v.err
		v.cancel(v.err)
	case v.want.Bytes == 0 && v.n > v.max:
		v.err = Permanent(fmt.Errorf("the input is larger than %d bytes, the most this worker downloads for a chunk of unknown size: give the chunk's bytes in the job, or raise the worker's --max-input-bytes", v.max))
		err = v.err
		v.cancel(v.err)
	case err == io.EOF:
		v.eof = true
	case err != nil && v.ctx.Err() != nil:
		v.err = fmt.Errorf("download the input: %w", context.Cause(v.ctx))
	case err != nil:
		v.err = fmt.Errorf("download the input: %w", err)
	}
	return n, err
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
		return fmt.Errorf("the input is %d bytes; the task names %d: the chunk changed at its source, or the download was cut", v.n, v.want.Bytes)
	}
	if v.want.SHA256 == "" {
		return nil
	}
	got := hex.EncodeToString(v.h.Sum(nil))
	if !strings.EqualFold(got, v.want.SHA256) {
		return fmt.Errorf("the input's sha256 is %s; the task names %s: the chunk changed at its source, or the download is corrupt", got, v.want.SHA256)
	}
	return nil
}
