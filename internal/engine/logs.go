package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// Log limits.
const (
	MaxLogLinesPerRequest = 1000
	MaxLogLineBytes       = 16 << 10
	MaxLogLinesPerTask    = 100_000
)

// AppendLogsParams is a batch of a worker's log lines for one attempt.
type AppendLogsParams struct {
	TaskID   string
	WorkerID string
	Attempt  int
	Lines    []string
	// Offset, when set, is the position of Lines[0] among the lines the
	// attempt sent (0 for its first): lines at positions already stored
	// for the attempt are skipped, so a batch sent again after its answer
	// was lost is stored once. Nil appends every line.
	Offset *int64
}

// AppendLogs records log lines of (worker, attempt). The lease must be live,
// or the task completed or failed by that very attempt (so that lines sent
// just after the outcome are kept), and the attempt's deadline, if any,
// not passed. Lines over MaxLogLineBytes are cut; a
// task keeps its first MaxLogLinesPerTask lines and drops the rest. With
// p.Offset, appending the same batch again changes nothing.
func (e *Engine) AppendLogs(ctx context.Context, p AppendLogsParams) error {
	if err := domain.CheckLeaseRequest(p.WorkerID, p.Attempt); err != nil {
		return err
	}
	p.WorkerID = domain.PrincipalOf(ctx).LeaseOwner(p.WorkerID)
	if len(p.Lines) > MaxLogLinesPerRequest {
		return domain.Invalidf("lines has %d entries; send at most %d per request", len(p.Lines), MaxLogLinesPerRequest)
	}
	if p.Offset != nil && *p.Offset < 0 {
		return domain.Invalidf("offset is %d; it is the position of the first line among the attempt's lines, 0 or more", *p.Offset)
	}
	if len(p.Lines) == 0 {
		return nil
	}
	lines := make([]string, len(p.Lines))
	for i, l := range p.Lines {
		if len(l) > MaxLogLineBytes {
			l = strings.ToValidUTF8(l[:MaxLogLineBytes], "") + " [cut]"
		}
		lines[i] = l
	}
	err := e.tx(ctx, func(q store.Querier) error {
		t, err := q.TaskGet(ctx, p.TaskID)
		if err != nil {
			return notFound(err, "task %q", p.TaskID)
		}
		now := e.now()
		if err := domain.CheckLogWrite(t, p.WorkerID, p.Attempt, now); err != nil {
			return err
		}
		return q.TaskLogAppend(ctx, &store.TaskLogAppendParams{
			TaskID: t.ID, Attempt: p.Attempt, Lines: lines, Offset: p.Offset, Now: now, MaxLines: MaxLogLinesPerTask,
		})
	})
	if err != nil {
		return fmt.Errorf("append logs: %w", err)
	}
	e.followers.notify(p.TaskID)
	return nil
}

// LogPage is a page of a task's log and whether the task is final, in
// which case no line will follow the page's last.
type LogPage struct {
	Lines []domain.LogLine
	Final bool
}

// ListLogs returns up to limit lines of a task's log after the line with ID
// after (0 from the start).
func (e *Engine) ListLogs(ctx context.Context, taskID string, after int64, limit int) (*LogPage, error) {
	t, err := clientTask(ctx, ballotReader(e.store), taskID)
	if err != nil {
		return nil, err
	}
	if t.JobID != "" && t.Kind != domain.KindTree {
		// A job deleted by retention is gone at once, although its tasks
		// and their logs go in batches after it.
		if _, err := e.jobSettings(ctx, t.JobID); err != nil {
			return nil, notFound(err, "task %q", taskID)
		}
	}
	// Read the state before the lines: a task final before its lines were
	// read has no line appended after them.
	final := t.State.Final()
	lines, err := e.store.TaskLogList(ctx, &store.TaskLogListParams{TaskID: taskID, After: after, Limit: limit})
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("read log of task %s: %w", taskID, err))
	}
	return &LogPage{Lines: lines, Final: final}, nil
}

// logFollowPage is how many lines one read of a followed log takes.
const logFollowPage = 1000

// FollowLogs hands emit a task's log, a page of lines at a time in order,
// starting with the first page (possibly empty), so that a caller can
// answer once the task is known. With follow it then waits for new lines,
// woken by appends to this task's log, until the task is final (it
// returns nil) or ctx is done (ctx's error). A follow holds one of the
// process's stream slots while it runs: without a free one it fails with
// domain.ErrBusy before reading anything. An error of emit ends it.
func (e *Engine) FollowLogs(ctx context.Context, taskID string, follow bool, emit func([]domain.LogLine) error) error {
	if follow {
		release, err := e.streams.take()
		if err != nil {
			return err
		}
		defer release()
	}
	b, done := e.followers.watch(taskID)
	defer done()
	var after int64
	for first := true; ; first = false {
		woken := b.Wait() // before reading: no append is missed
		p, err := e.ListLogs(ctx, taskID, after, logFollowPage)
		if err != nil {
			return err
		}
		if len(p.Lines) > 0 || first {
			if err := emit(p.Lines); err != nil {
				return err
			}
		}
		if n := len(p.Lines); n > 0 {
			after = p.Lines[n-1].ID
		}
		switch {
		case len(p.Lines) == logFollowPage:
			continue
		case !follow || p.Final:
			return nil
		}
		t := time.NewTimer(logPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// logPoll bounds how long a follow waits between reads when nothing wakes
// it: a task that became final without an append, or lines appended by
// another process.
const logPoll = 500 * time.Millisecond

// CountWaiting returns how many claims of this process wait for work and how
// many streams are open.
func (e *Engine) CountWaiting() (claims, streams int) {
	e.claimers.mu.Lock()
	claims = len(e.claimers.waiting)
	e.claimers.mu.Unlock()
	e.streams.mu.Lock()
	defer e.streams.mu.Unlock()
	return claims, e.streams.open
}

// HoldStream takes one of the process's stream slots for a stream other
// than a log follow (the dashboard's live views), until release is
// called; without a free one it fails with domain.ErrBusy.
func (e *Engine) HoldStream() (release func(), err error) { return e.streams.take() }
