package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// ballotTx is the Querier of a transaction, in which the replicas of a
// chunk being voted on read and write as tasks of their own although
// they are ballots in their chunk's row (domain.Ballot): a replica's ID
// reads its chunk, locked where the database can, and shows the ballot
// (domain.BallotTask); a replica written is folded back into its chunk
// (domain.FoldBallot), which is written once per statement however many
// of its ballots changed. Every chunk with ballots read in the
// transaction is kept, and later reads of it or of its ballots are
// answered from there, so that its readers share one row and write it
// at its latest version. A replica is never inserted: its ballot is made
// in its chunk (domain.AddBallots), which its caller writes.
//
// A chunk this engine remembers as it last wrote it (rows) is only locked
// and its version read: when the version is still the one remembered,
// the row is not read again. The chunks with ballots written are in
// written, for the engine to remember once the transaction commits.
type ballotTx struct {
	store.Querier
	chunks   map[string]*domain.Task // by ID
	readOnly bool                    // outside a transaction: reads lock nothing
	rows     *held                   // the chunks being voted on, as last written here
	written  []*domain.Task          // the chunks with ballots written, at their new versions
}

func newBallotTx(q store.Querier, rows *held) *ballotTx {
	return &ballotTx{Querier: q, chunks: map[string]*domain.Task{}, rows: rows}
}

// ballotReader is a ballotTx for reads outside a transaction.
func ballotReader(q store.Querier) *ballotTx {
	return &ballotTx{Querier: q, chunks: map[string]*domain.Task{}, readOnly: true}
}

// TaskGet reads the task id, or the ballot a replica's ID names.
func (b *ballotTx) TaskGet(ctx context.Context, id string) (*domain.Task, error) {
	got, err := b.read(ctx, []string{id}, false)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	return got[0], nil
}

func (b *ballotTx) TaskGetMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	return b.read(ctx, ids, false)
}

func (b *ballotTx) TaskLockMany(ctx context.Context, ids []string) ([]*domain.Task, error) {
	return b.read(ctx, ids, true)
}

// read returns the tasks of ids that exist, each once: the chunks of
// replicas' IDs are locked, with the others when lock is set, in one
// statement.
func (b *ballotTx) read(ctx context.Context, ids []string, lock bool) ([]*domain.Task, error) {
	if b.plain(ids) {
		if lock && !b.readOnly {
			return b.Querier.TaskLockMany(ctx, ids)
		}
		return b.Querier.TaskGetMany(ctx, ids)
	}
	var locks, gets []string
	asked := map[string]bool{}
	for _, id := range ids {
		chunkID, _, isBallot := domain.BallotOf(id)
		if !isBallot {
			chunkID = id
		}
		if b.chunks[chunkID] != nil || asked[chunkID] {
			continue
		}
		asked[chunkID] = true
		if (isBallot || lock) && !b.readOnly {
			locks = append(locks, chunkID)
		} else {
			gets = append(gets, chunkID)
		}
	}
	plain := map[string]*domain.Task{}
	for _, r := range []struct {
		ids  []string
		read func(context.Context, []string) ([]*domain.Task, error)
	}{{locks, b.lock}, {gets, b.Querier.TaskGetMany}} {
		if len(r.ids) == 0 {
			continue
		}
		got, err := r.read(ctx, r.ids)
		if err != nil {
			return nil, err
		}
		for _, t := range got {
			if len(t.Ballots) > 0 {
				b.chunks[t.ID] = t
			} else {
				plain[t.ID] = t
			}
		}
	}
	out := make([]*domain.Task, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if chunkID, n, ok := domain.BallotOf(id); ok {
			if c := b.chunks[chunkID]; c != nil {
				if r, ok := domain.BallotTask(c, n); ok {
					out = append(out, r)
				}
			}
			continue
		}
		if c := b.chunks[id]; c != nil {
			out = append(out, c)
		} else if t := plain[id]; t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// lock returns the tasks of ids that exist, locked: those remembered in
// b.rows at the version they still have come from there, the others are
// read.
func (b *ballotTx) lock(ctx context.Context, ids []string) ([]*domain.Task, error) {
	known := map[string]*domain.Task{}
	if b.rows != nil {
		for _, id := range ids {
			if t := b.rows.row(id); t != nil {
				known[id] = t
			}
		}
	}
	if len(known) == 0 {
		return b.Querier.TaskLockMany(ctx, ids)
	}
	versions, err := b.Querier.TaskLockVersions(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*domain.Task, 0, len(ids))
	var read, stale []string
	for _, id := range ids {
		v, ok := versions[id]
		switch t := known[id]; {
		case !ok:
			stale = append(stale, id) // gone
		case t != nil && t.Version == v:
			out = append(out, t)
		default:
			read = append(read, id)
			stale = append(stale, id) // written elsewhere, or never remembered
		}
	}
	if len(stale) == 0 {
		return out, nil
	}
	b.rows.drop(stale)
	got, err := b.Querier.TaskGetMany(ctx, read) // locked above
	if err != nil {
		return nil, err
	}
	return append(out, got...), nil
}

// plain reports whether ids name no replica and no chunk read here, so
// that a read of them is the store's own: a transaction without votes,
// as most are, pays nothing for ballots.
func (b *ballotTx) plain(ids []string) bool {
	if len(b.chunks) > 0 {
		return false
	}
	for _, id := range ids {
		if _, _, ok := domain.BallotOf(id); ok {
			return false
		}
	}
	return true
}

// TaskUpdate writes t, or folds the ballot it stands for into its chunk
// and writes that.
func (b *ballotTx) TaskUpdate(ctx context.Context, t *domain.Task) error {
	if _, _, ok := domain.BallotOf(t.ID); !ok && b.chunks[t.ID] == nil {
		return b.Querier.TaskUpdate(ctx, t)
	}
	return b.TaskUpdateMany(ctx, []*domain.Task{t})
}

// TaskUpdateMany writes tasks, the ballots among them folded into their
// chunks, each chunk once.
func (b *ballotTx) TaskUpdateMany(ctx context.Context, tasks []*domain.Task) error {
	if len(b.chunks) == 0 && !slices.ContainsFunc(tasks, func(t *domain.Task) bool { return t.Kind == domain.KindReplica }) {
		return b.write(ctx, tasks) // no vote read in this transaction
	}
	out := make([]*domain.Task, 0, len(tasks))
	written := map[string]bool{}
	add := func(c *domain.Task) {
		if !written[c.ID] {
			written[c.ID] = true
			out = append(out, c)
		}
	}
	for _, t := range tasks {
		chunkID, _, isBallot := domain.BallotOf(t.ID)
		if !isBallot || t.Kind != domain.KindReplica {
			if c := b.chunks[t.ID]; c != nil {
				if c != t {
					*c = *t // a copy of its own: the latest
				}
				add(c)
			} else {
				out = append(out, t)
			}
			continue
		}
		c := b.chunks[chunkID]
		if c == nil {
			return fmt.Errorf("replica %s written before its chunk was read", t.ID)
		}
		domain.FoldBallot(c, t)
		add(c)
	}
	return b.write(ctx, out)
}

// write writes tasks in one statement, and notes the chunks with ballots
// among them.
func (b *ballotTx) write(ctx context.Context, tasks []*domain.Task) error {
	if err := b.Querier.TaskUpdateMany(ctx, tasks); err != nil {
		return err
	}
	for _, t := range tasks {
		if len(t.Ballots) > 0 {
			b.written = append(b.written, t)
		}
	}
	return nil
}
