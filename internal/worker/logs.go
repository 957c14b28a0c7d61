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
//
// Every batch carries its offset, the position of its first line among
// the lines of the attempt, and a batch that did not get through is sent
// again as it was, with the same offset, before any other: when only its
// answer was lost, the coordinator skips the lines it already holds.
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
	next     int64     // the offset of the next new batch: lines handed to batches so far
	retry    *logBatch // the batch to send again first; nil when none

	kick chan struct{} // a batch is full
	stop chan struct{}
	done chan struct{}
}

// logBatch is lines of an attempt's log, the first at position offset
// among all the lines the attempt sent.
type logBatch struct {
	offset int64
	lines  []string
}

// logSink sends one batch of an attempt's log lines. An error wrapping
// errLogGone means no batch of the attempt can ever be taken, one wrapping
// errLogLater that this one may be taken later; any other drops the batch.
type logSink func(ctx context.Context, b logBatch) error

var (
	errLogGone  = errors.New("the coordinator takes no more lines of this attempt")
	errLogLater = errors.New("the coordinator does not answer for now")
)

// restLogSink sends an attempt's lines through the REST API.
func restLogSink(c *client.Client, t *client.Task, workerID string) logSink {
	return func(ctx context.Context, b logBatch) error {
		err := c.AppendLogs(ctx, t.TaskID, client.LogLines{WorkerID: workerID, Attempt: t.Attempt, Offset: &b.offset, Lines: b.lines})
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

// shipLogs starts shipping an attempt's log lines to sink until the
// shipper is closed, which sends what is left and waits for it.
func (w *Worker) shipLogs(ctx context.Context, sink logSink, log *slog.Logger) *shipper {
	s := newShipper(sink, w.cfg.ID, log, w.cfg.LogInterval, w.cfg.LogBatch)
	go s.run(context.WithoutCancel(ctx))
	return s
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

// ship sends the batch to send again, if any, then the waiting lines, a
// batch at a time.
func (s *shipper) ship(ctx context.Context, last bool) {
	for {
		batch, ok := s.nextBatch()
		if !ok {
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.sink(callCtx, batch)
		cancel()
		switch {
		case err == nil:
			continue
		case errors.Is(err, errLogGone):
			// No log endpoint on this coordinator, or the attempt is over:
			// no later try can succeed.
			s.log.Debug("task log lines not shipped", "lines", len(batch.lines), "error", err)
			s.disable()
			return
		case errors.Is(err, errLogLater) && !last:
			// Perhaps only the answer was lost: send the very same batch
			// again, whose offset lets the coordinator skip what it holds.
			s.log.Debug("task log lines not shipped yet; will retry", "lines", len(batch.lines), "error", err)
			s.mu.Lock()
			s.retry = &batch
			s.mu.Unlock()
			return
		default:
			s.log.Warn("task log lines dropped", "lines", len(batch.lines), "error", err)
			return
		}
	}
}

// nextBatch takes the batch to send again, else makes the next one from
// the waiting lines (with a line that counts the lines dropped before
// them, if any); false when there is nothing to send.
func (s *shipper) nextBatch() (logBatch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return logBatch{}, false
	}
	if b := s.retry; b != nil {
		s.retry = nil
		return *b, true
	}
	if len(s.pending) == 0 {
		return logBatch{}, false
	}
	var lines []string
	if s.dropped > 0 {
		lines = append(lines, fmt.Sprintf("[scimesh worker %s: %d earlier log lines dropped: the coordinator did not take them in time]", s.workerID, s.dropped))
		s.dropped = 0
	}
	n := min(len(s.pending), s.maxBatch-len(lines))
	lines = append(lines, s.pending[:n]...)
	s.pending = s.pending[n:]
	b := logBatch{offset: s.next, lines: lines}
	s.next += int64(len(lines))
	return b, true
}

func (s *shipper) disable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disabled, s.pending, s.dropped, s.retry = true, nil, 0, nil
}
