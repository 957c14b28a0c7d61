package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/client"
)

// Bounds of the task log shipping.
const (
	// maxLineBytes bounds one log line; a longer one is cut and marked.
	maxLineBytes = 8 << 10
	// maxPendingLines bounds the lines waiting to be shipped while the
	// coordinator does not take them; older lines are dropped first, and
	// the count of dropped lines is shipped in their place.
	maxPendingLines = 10000
	// maxBatchLines bounds the lines of one request.
	maxBatchLines = 1000
	// tailLines and tailLineBytes bound the last stderr lines quoted in a
	// failure's error.
	tailLines     = 20
	tailLineBytes = 400
)

// lineWriter splits what a command writes to stderr into lines (without
// their "\n" or "\r\n") and hands each to emit. One goroutine writes to it
// at a time (exec's copier); flush hands over a last unterminated line.
type lineWriter struct {
	buf      []byte
	cut      bool // the line in buf was cut at maxLineBytes; skip to its end
	emit     func(string)
	tail     []string // the last tailLines lines, for error messages
	tailNext int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.add(p)
			break
		}
		w.add(p[:i])
		w.end()
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) add(p []byte) {
	if w.cut {
		return
	}
	if room := maxLineBytes - len(w.buf); len(p) > room {
		w.buf = append(w.buf, p[:room]...)
		w.buf = append(bytes.ToValidUTF8(w.buf, nil), " […line cut at 8 KiB]"...)
		w.cut = true
		return
	}
	w.buf = append(w.buf, p...)
}

func (w *lineWriter) end() {
	line := strings.TrimSuffix(string(w.buf), "\r")
	w.buf, w.cut = w.buf[:0], false
	w.emit(line)
	short := line
	if len(short) > tailLineBytes {
		short = short[:tailLineBytes] + "…"
	}
	if len(w.tail) < tailLines {
		w.tail = append(w.tail, short)
		return
	}
	w.tail[w.tailNext] = short
	w.tailNext = (w.tailNext + 1) % tailLines
}

// flush ends a last line that has no "\n".
func (w *lineWriter) flush() {
	if len(w.buf) > 0 || w.cut {
		w.end()
	}
}

// lastLines returns the last stderr lines, oldest first, for an error.
func (w *lineWriter) lastLines() []string {
	return append(append([]string(nil), w.tail[w.tailNext:]...), w.tail[:w.tailNext]...)
}

// shipper sends a task attempt's log lines to the coordinator in batches:
// when maxBatch lines are waiting or every interval, and once more when it
// stops. It gives up quietly when the coordinator has no log for the
// attempt (no log endpoint, or the attempt's lease is gone), and keeps
// lines for a later try while the coordinator is unreachable.
type shipper struct {
	sink     logSink
	workerID string
	log      *slog.Logger
	interval time.Duration
	maxBatch int

	mu       sync.Mutex
	pending  []string
	dropped  int
	disabled bool

	kick chan struct{} // a batch is full
	stop chan struct{}
	done chan struct{}
}

// logSink sends one batch of an attempt's log lines. An error wrapping
// errLogGone means no batch of the attempt can ever be taken, one wrapping
// errLogLater that this one may be taken later; any other drops the batch.
type logSink func(ctx context.Context, lines []string) error

var (
	errLogGone  = errors.New("the coordinator takes no more lines of this attempt")
	errLogLater = errors.New("the coordinator does not answer for now")
)

// restLogSink sends an attempt's lines through the REST API.
func restLogSink(c *client.Client, t *client.Task, workerID string) logSink {
	return func(ctx context.Context, lines []string) error {
		err := c.AppendLogs(ctx, t.TaskID, client.LogLines{WorkerID: workerID, Attempt: t.Attempt, Lines: lines})
		switch {
		case err == nil:
			return nil
		case client.IsNotFound(err), client.IsLeaseLost(err), client.IsCancelled(err):
			return fmt.Errorf("%w: %w", errLogGone, err)
		case client.IsRetryable(err):
			return fmt.Errorf("%w: %w", errLogLater, err)
		}
		return err
	}
}

func newShipper(sink logSink, workerID string, log *slog.Logger, interval time.Duration, maxBatch int) *shipper {
	return &shipper{
		sink: sink, workerID: workerID, log: log, interval: interval, maxBatch: min(maxBatch, maxBatchLines),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// add queues a line.
func (s *shipper) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return
	}
	if len(s.pending) >= maxPendingLines {
		s.pending = s.pending[1:]
		s.dropped++
	}
	s.pending = append(s.pending, line)
	if len(s.pending) >= s.maxBatch {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// run ships until close is called; ctx bounds each request.
func (s *shipper) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.ship(ctx, true)
			return
		case <-t.C:
		case <-s.kick:
		}
		s.ship(ctx, false)
	}
}

// close ships what is left, once, and waits for run to return.
func (s *shipper) close() {
	close(s.stop)
	<-s.done
}

// ship sends the waiting lines, a batch at a time.
func (s *shipper) ship(ctx context.Context, last bool) {
	for {
		s.mu.Lock()
		if s.disabled || len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		var batch []string
		if s.dropped > 0 {
			batch = append(batch, fmt.Sprintf("[scimesh worker %s: %d earlier log lines dropped: the coordinator did not take them in time]", s.workerID, s.dropped))
			s.dropped = 0
		}
		n := min(len(s.pending), s.maxBatch-len(batch))
		batch = append(batch, s.pending[:n]...)
		s.pending = s.pending[n:]
		s.mu.Unlock()

		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.sink(callCtx, batch)
		cancel()
		switch {
		case err == nil:
			continue
		case errors.Is(err, errLogGone):
			// No log endpoint on this coordinator, or the attempt is over:
			// no later try can succeed.
			s.log.Debug("task log lines not shipped", "lines", len(batch), "error", err)
			s.disable()
			return
		case errors.Is(err, errLogLater) && !last:
			s.log.Debug("task log lines not shipped yet; will retry", "lines", len(batch), "error", err)
			s.requeue(batch)
			return
		default:
			s.log.Warn("task log lines dropped", "lines", len(batch), "error", err)
			return
		}
	}
}

func (s *shipper) disable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disabled, s.pending, s.dropped = true, nil, 0
}

// requeue puts batch back in front of the waiting lines, within bounds.
func (s *shipper) requeue(batch []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(batch, s.pending...)
	if over := len(all) - maxPendingLines; over > 0 {
		all = all[over:]
		s.dropped += over
	}
	s.pending = all
}
