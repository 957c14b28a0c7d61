package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// The outbox: every change a tree spanning shards makes on another shard is
// a Message, written to this shard's outbox table in the same transaction as
// the local change that causes it, then delivered to the other shard's
// Internal service until that shard acknowledges it. A message is delivered
// at least once — again after a crash between the receiver's commit and its
// answer — and every receiver applies a message idempotently, so each
// message takes effect exactly once.

// MessageKind names a message to another shard: one per call of the
// Internal service.
type MessageKind string

// The kinds of Message.
const (
	// MsgSubmitTask creates a tree's tasks on the receiving shard.
	MsgSubmitTask MessageKind = "submit_task"
	// MsgReportSuccess hands an upstream's result to its downstream.
	MsgReportSuccess MessageKind = "report_success"
	// MsgSetFailed fails a downstream whose upstream failed for good.
	MsgSetFailed MessageKind = "set_failed"
	// MsgSetCancel cancels a task whose downstream failed or was cancelled.
	MsgSetCancel MessageKind = "set_cancel"
)

// Message is a change to apply on another shard. Which fields are set
// depends on Kind.
type Message struct {
	Kind MessageKind `json:"-"`
	// TaskID is the receiving shard's task the message is about (all
	// kinds but MsgSubmitTask).
	TaskID string `json:"task_id,omitempty"`
	// UpstreamID is the upstream that succeeded (MsgReportSuccess) or
	// failed (MsgSetFailed).
	UpstreamID string `json:"upstream_id,omitempty"`
	// Result is the upstream's JSON result (MsgReportSuccess).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the error the receiver records (MsgSetFailed), naming the
	// task that failed first, or why the task is cancelled (MsgSetCancel).
	Error string `json:"error,omitempty"`
	// Tasks are the tree's tasks on the receiving shard (MsgSubmitTask).
	Tasks []PlacedTask `json:"tasks,omitempty"`
}

// Peers delivers messages to other shards. A delivery the receiver refuses
// for good (the message can never apply) wraps ErrRefused; one that did not
// reach the receiver, or that it could not answer, wraps ErrUnreachable;
// any error is retried but a refusal.
type Peers interface {
	Deliver(ctx context.Context, shard string, m *Message) error
}

var (
	// ErrRefused marks a message its receiver will never accept; the
	// outbox gives up on it, ends its tree, and keeps it, for people to
	// look at.
	ErrRefused = errors.New("refused by the receiving shard")
	// ErrUnreachable marks a delivery that did not get an answer from the
	// receiving shard; the shard's other messages wait for the retry too,
	// until Config.PeerGiveUp (when set) runs out.
	ErrUnreachable = errors.New("the receiving shard does not answer")
	// ErrNoTask marks a message about a task the receiving shard does not
	// have: not yet (its creation is on its way), or never (its creation
	// was refused). It is retried for noTaskPatience, then given up.
	ErrNoTask = errors.New("the receiving shard has no such task")
)

// noTaskPatience is how long a message waits for its task to be created.
const noTaskPatience = 24 * time.Hour

// Outbox delivery settings.
const (
	// outboxLease is how long a delivery holds its messages before another
	// process (or this one, after a crash) may try them.
	outboxLease = 30 * time.Second
	// outboxBatch bounds the messages claimed at once.
	outboxBatch = 100
	// deliverTimeout bounds one delivery.
	deliverTimeout = 10 * time.Second
	// Retries of an undelivered message wait outboxMinBackoff, doubling
	// up to outboxMaxBackoff, each times a random factor in [0.5, 1].
	outboxMinBackoff = 200 * time.Millisecond
	outboxMaxBackoff = 5 * time.Second
)

// local reports whether the task with id lives on this shard.
func (e *Engine) local(id string) bool { return domain.ShardOf(id) == e.cfg.Shard }

// outboxMessage encodes m for the outbox, due at due.
func (e *Engine) outboxMessage(m *Message, due time.Time) (*store.OutboxMessage, error) {
	shard := domain.ShardOf(m.TaskID)
	if m.Kind == MsgSubmitTask && len(m.Tasks) > 0 {
		shard = domain.ShardOf(m.Tasks[0].ID)
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode a %s message: %w", m.Kind, err)
	}
	return &store.OutboxMessage{Shard: shard, Kind: string(m.Kind), Payload: payload, NextAttemptAt: due, CreatedAt: e.now()}, nil
}

// send records messages in the outbox inside transaction q, due at once;
// the outbox loop is woken when the transaction commits (see tx).
func (e *Engine) send(ctx context.Context, q store.Querier, msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]*store.OutboxMessage, len(msgs))
	for i, m := range msgs {
		var err error
		if out[i], err = e.outboxMessage(m, e.now()); err != nil {
			return err
		}
	}
	return q.OutboxInsert(ctx, out)
}

// outboxWatch is the Querier tx hands its function: it notes whether the
// transaction recorded outbox messages, so that tx wakes the outbox loop
// once they are committed.
type outboxWatch struct {
	store.Querier
	sent bool
}

func (w *outboxWatch) OutboxInsert(ctx context.Context, msgs []*store.OutboxMessage) error {
	w.sent = true
	return w.Querier.OutboxInsert(ctx, msgs)
}

// DeliverOutbox delivers every message due, and returns how many it
// delivered. Messages whose shard does not answer are retried later with a
// backoff; messages refused for good are kept, given up on. It is safe to
// run in every process sharing a database: each message is claimed by one.
func (e *Engine) DeliverOutbox(ctx context.Context) (int, error) {
	if e.cfg.Peers == nil {
		return 0, nil
	}
	n := 0
	for {
		now := e.now()
		msgs, err := e.store.OutboxClaim(ctx, &store.OutboxClaimParams{Now: now, Until: now.Add(outboxLease), Limit: outboxBatch})
		if err != nil {
			return n, mapStoreErr(fmt.Errorf("claim outbox messages: %w", err))
		}
		n += e.deliver(ctx, msgs)
		if len(msgs) < outboxBatch {
			return n, nil
		}
	}
}

// deliver delivers claimed messages, each shard's in ID order and the
// shards at once, and returns how many it delivered. When a shard does not
// answer, its remaining messages are not tried: those it has left
// unanswered past Config.PeerGiveUp are given up on with it, the others
// wait for the next attempt. Any other failure (a task not created there
// yet, say) delays only its own message.
func (e *Engine) deliver(ctx context.Context, msgs []*store.OutboxMessage) int {
	byShard := map[string][]*store.OutboxMessage{}
	for _, m := range msgs {
		byShard[m.Shard] = append(byShard[m.Shard], m)
	}
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for _, list := range byShard {
		wg.Go(func() {
			for i, m := range list {
				err := e.deliverOne(ctx, m)
				if err == nil {
					mu.Lock()
					n++
					mu.Unlock()
					continue
				}
				if !errors.Is(err, ErrUnreachable) {
					continue
				}
				retry := m.NextAttemptAt
				if retry.IsZero() { // given up on: the younger ones wait a while
					retry = e.now().Add(outboxMaxBackoff)
				}
				for _, rest := range list[i+1:] {
					if e.pastPeerGiveUp(rest) {
						e.giveUp(ctx, rest, decodeMessage(rest), e.unansweredCause(rest, err), true)
						continue
					}
					rest.NextAttemptAt = retry
					e.outboxUpdate(ctx, rest)
				}
				return
			}
		})
	}
	wg.Wait()
	return n
}

// decodeMessage returns the message m holds; one that does not decode
// has only its kind.
func decodeMessage(m *store.OutboxMessage) *Message {
	msg := &Message{}
	if json.Unmarshal(m.Payload, msg) != nil {
		msg = &Message{}
	}
	msg.Kind = MessageKind(m.Kind)
	return msg
}

// deliverOne delivers m and records the outcome: deleted when delivered,
// given up on when refused, when its task never appeared, or when its
// shard left it unanswered past Config.PeerGiveUp; else retried after a
// backoff.
func (e *Engine) deliverOne(ctx context.Context, m *store.OutboxMessage) error {
	msg := &Message{Kind: MessageKind(m.Kind)}
	err := json.Unmarshal(m.Payload, msg)
	if err != nil {
		err = fmt.Errorf("%w: undecodable outbox message %d: %w", ErrRefused, m.ID, err)
	} else {
		dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
		err = e.cfg.Peers.Deliver(dctx, m.Shard, msg)
		cancel()
	}
	m.Attempts++
	switch {
	case err == nil:
		if derr := e.store.OutboxDelete(context.WithoutCancel(ctx), m.ID); derr != nil {
			e.log.Warn("delivered outbox message not deleted; it will be delivered again", "id", m.ID, "error", derr)
		}
		return nil
	case errors.Is(err, ErrRefused):
		e.giveUp(ctx, m, msg, err, false)
		return err
	case errors.Is(err, ErrUnreachable) && e.pastPeerGiveUp(m):
		e.giveUp(ctx, m, msg, e.unansweredCause(m, err), true)
		return err
	case errors.Is(err, ErrNoTask) && e.now().Sub(m.CreatedAt) > noTaskPatience:
		e.giveUp(ctx, m, msg, fmt.Errorf("task %s never appeared on shard %s in %s: %w", msg.TaskID, m.Shard, noTaskPatience, err), false)
		return err
	}
	e.log.Warn("outbox delivery failed; will retry", "shard", m.Shard, "kind", m.Kind,
		"task_id", msg.TaskID, "attempts", m.Attempts, "error", err)
	wait := outboxMinBackoff << min(m.Attempts-1, 10)
	wait = time.Duration(float64(min(wait, outboxMaxBackoff)) * (0.5 + e.cfg.Jitter()/2))
	m.NextAttemptAt = e.now().Add(wait)
	m.LastError = err.Error()
	e.outboxUpdate(ctx, m)
	return err
}

// pastPeerGiveUp reports whether m's shard has left it unanswered for
// longer than Config.PeerGiveUp allows.
func (e *Engine) pastPeerGiveUp(m *store.OutboxMessage) bool {
	return e.cfg.PeerGiveUp > 0 && e.unanswered(m) >= e.cfg.PeerGiveUp
}

// unanswered is how long m has waited for its shard: since it was
// written, or since this engine started if later — a coordinator that
// was down did not try its messages meanwhile.
func (e *Engine) unanswered(m *store.OutboxMessage) time.Duration {
	since := m.CreatedAt
	if e.started.After(since) {
		since = e.started
	}
	return e.now().Sub(since)
}

// unansweredCause is why the outbox gives up on m, whose shard did not
// answer its last attempt (err).
func (e *Engine) unansweredCause(m *store.OutboxMessage, err error) error {
	last := strings.TrimPrefix(err.Error(), ErrUnreachable.Error()+": ")
	return fmt.Errorf("shard %q did not answer for %s (%s): gave up on the tree; check that the shard exists and runs, "+
		"or give it longer with --peer-give-up", m.Shard, e.unanswered(m).Round(time.Second), last)
}

// giveUp stops delivering m (msg decoded), for cause, and ends what it
// leaves unfinished: a tree whose tasks could not be created fails
// (abandonTasks); a tree whose result or failure could not be handed on
// can never complete, so it fails too (abandonTree). unanswered says that
// the receiver did not answer, so may still apply a last message should it
// come back. When ending the tree fails, m is tried again later, the
// receiver's answer deciding once more.
func (e *Engine) giveUp(ctx context.Context, m *store.OutboxMessage, msg *Message, cause error, unanswered bool) {
	ctx = context.WithoutCancel(ctx)
	e.log.Error("giving up on an outbox message", "shard", m.Shard, "kind", m.Kind, "task_id", msg.TaskID,
		"upstream_id", msg.UpstreamID, "attempts", m.Attempts, "error", cause)
	m.NextAttemptAt = time.Time{}
	var err error
	switch msg.Kind {
	case MsgSubmitTask:
		err = e.abandonTasks(ctx, msg.Tasks, cause)
	case MsgReportSuccess:
		why := fmt.Sprintf("task %s could not hand its result to task %s: %v", msg.UpstreamID, msg.TaskID, cause)
		err = e.abandonTree(ctx, m.Shard, msg, why, unanswered)
	case MsgSetFailed:
		why := fmt.Sprintf("%s (the failure could not reach task %s: %v)", msg.Error, msg.TaskID, cause)
		err = e.abandonTree(ctx, m.Shard, msg, why, false)
	}
	// MsgSetCancel: the tree is failing already (a cancellation follows a
	// failure); the task left is the silent shard's to cancel.
	if err != nil {
		e.log.Error("ending the tree of a message given up on failed; will retry", "shard", m.Shard, "kind", m.Kind, "error", err)
		m.NextAttemptAt = e.now().Add(outboxMaxBackoff)
		cause = errors.Join(cause, err)
	}
	m.LastError = cause.Error()
	e.outboxUpdate(ctx, m)
}

// abandonTasks fails the tree of tasks that their shard refused to create
// for good: each one's downstream fails, naming it, and its upstreams are
// cancelled, so that the failure spreads over the tree as if the task had
// failed.
func (e *Engine) abandonTasks(ctx context.Context, tasks []PlacedTask, cause error) error {
	gone := map[string]bool{}
	for _, p := range tasks {
		gone[p.ID] = true
	}
	var msgs []*Message
	var errs []error
	for _, p := range tasks {
		why := fmt.Sprintf("task %s could not be created on shard %s: %v", p.ID, domain.ShardOf(p.ID), cause)
		if d := p.DownstreamID; d != "" && !gone[d] {
			if !e.local(d) {
				msgs = append(msgs, &Message{Kind: MsgSetFailed, TaskID: d, UpstreamID: p.ID, Error: why})
			} else if err := e.upstreamFailed(ctx, d, p.ID, why, gone); err != nil {
				errs = append(errs, err)
			}
		}
		for _, a := range p.Args {
			if u := a.Ref; u != "" && !gone[u] {
				if !e.local(u) {
					msgs = append(msgs, &Message{Kind: MsgSetCancel, TaskID: u, Error: why})
				} else if err := e.cancelTree(ctx, u, why, gone); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := e.tx(ctx, func(q store.Querier) error { return e.send(ctx, q, msgs...) }); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// abandonTree ends the tree of msg, an upstream's result or failure that
// could not be handed to task msg.TaskID on shard: the tree can never
// complete. Its root fails with why — here when it is on this shard, else
// by a set_failed message, unless the root is on shard too — and the
// tree's tasks on this shard that are not final are cancelled, with their
// upstreams elsewhere that still owe a result. With lastWord, a set_failed
// message goes to msg.TaskID too, for shard to end its side of the tree
// should it answer again.
func (e *Engine) abandonTree(ctx context.Context, shard string, msg *Message, why string, lastWord bool) error {
	up, err := e.store.TaskGet(ctx, msg.UpstreamID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted since: nothing left here to end
	}
	if err != nil {
		return mapStoreErr(fmt.Errorf("task %s: %w", msg.UpstreamID, err))
	}
	tree := up.JobID
	var msgs []*Message
	if lastWord {
		msgs = append(msgs, &Message{Kind: MsgSetFailed, TaskID: msg.TaskID, UpstreamID: msg.UpstreamID, Error: why})
	}
	if e.local(tree) {
		// The root fails here, and cancels the rest of the tree.
		if err := e.upstreamFailed(ctx, tree, msg.TaskID, why, nil); err != nil {
			return err
		}
	} else if domain.ShardOf(tree) != shard {
		msgs = append(msgs, &Message{Kind: MsgSetFailed, TaskID: tree, UpstreamID: msg.TaskID, Error: why})
	}
	reason := "the tree was given up on: " + why
	return e.tx(ctx, func(q store.Querier) error {
		out := msgs
		if !e.local(tree) {
			more, err := e.cancelTreeHere(ctx, q, tree, "", msg.TaskID, nil, reason, e.now())
			if err != nil {
				return err
			}
			out = append(slices.Clip(msgs), more...)
		}
		return e.send(ctx, q, out...)
	})
}

// outboxUpdate records a message's delivery state; a message gone was
// delivered by another process.
func (e *Engine) outboxUpdate(ctx context.Context, m *store.OutboxMessage) {
	err := e.store.OutboxUpdate(context.WithoutCancel(ctx), m)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("outbox message state not recorded; it is retried when its claim ends", "id", m.ID, "error", err)
	}
}

// GetOutboxStats returns the size of this shard's outbox.
func (e *Engine) GetOutboxStats(ctx context.Context) (store.OutboxStats, error) {
	s, err := e.store.OutboxGetStats(ctx)
	return s, mapStoreErr(err)
}
