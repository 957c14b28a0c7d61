package table

import (
	"fmt"
	"slices"

	"github.com/scimesh/scimesh/internal/domain"
)

// Partial merges the outputs of a job's chunks as they complete, in any
// order, for a look at the final CSV before the last one: Add skips a
// chunk it already merged, so the outputs completed so far can be offered
// again and again and only the new ones are read. Its best rows are
// always those Merge gives over the chunks added.
//
// It holds the best topK rows and a bit per chunk index; it is not safe
// for concurrent use.
type Partial struct {
	m      *Merger
	seen   []uint64 // bit i: chunk i was added
	chunks int
}

// NewPartial returns a Partial with Merge's scoreColumn, order and topK.
func NewPartial(scoreColumn string, order domain.Order, topK int) (*Partial, error) {
	m, err := NewMerger(scoreColumn, order, topK)
	if err != nil {
		return nil, err
	}
	return &Partial{m: m}, nil
}

// Add merges the output of chunk c.Index unless it was added before. An
// error about the data is Merge's; after one, p must not be used.
func (p *Partial) Add(c ChunkOutput) error {
	if c.Index < 0 {
		return fmt.Errorf("table: merge: chunk index %d is negative", c.Index)
	}
	w, bit := c.Index/64, uint64(1)<<(c.Index%64)
	if w < len(p.seen) && p.seen[w]&bit != 0 {
		return nil
	}
	if w >= len(p.seen) {
		p.seen = append(p.seen, make([]uint64, w+1-len(p.seen))...)
	}
	if err := p.m.merge(c); err != nil {
		return err
	}
	p.seen[w] |= bit
	p.chunks++
	return nil
}

// Chunks is how many chunks were added.
func (p *Partial) Chunks() int { return p.chunks }

// Merger returns a Merger of its own that holds the best rows of the
// chunks added so far, at most rows of them (all topK when rows is 0 or
// more), ready for Join and Finish; p is not changed by them.
func (p *Partial) Merger(rows int) *Merger {
	k := p.m.k
	if rows <= 0 || rows > k.topK {
		rows = k.topK
	}
	// Sorted in a copy: k's entries are a heap that later Adds rely on.
	all := &keeper{desc: k.desc, topK: k.topK, entries: slices.Clone(k.entries)}
	best := all.sorted()[:min(rows, len(k.entries))]
	for i := range best {
		best[i].rec = slices.Clone(best[i].rec)
	}
	return &Merger{
		s:      p.m.s,
		k:      &keeper{desc: k.desc, topK: rows, entries: best},
		header: slices.Clone(p.m.header),
	}
}
