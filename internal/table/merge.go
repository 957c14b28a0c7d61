package table

import (
	"cmp"
	"container/heap"
	"encoding/csv"
	"fmt"
	"io"
	"slices"

	"github.com/scimesh/scimesh/internal/domain"
)

// ChunkOutput is one chunk's recorded output CSV, as ParseOutput accepted it.
type ChunkOutput struct {
	Index int    // the chunk's position among its job's chunks; breaks score ties
	Data  []byte // the output CSV; empty when the chunk produced nothing
}

// Merge writes to w the final CSV of a job: the header of the chunk outputs,
// then the best topK rows over all chunks by score in order (domain.Desc:
// higher first; domain.Asc: lower first), ties broken by chunk index and then
// by row order within the chunk's output. It returns the number of data rows
// written.
//
// The result depends only on the set of chunks, not on the order of the
// slice; two chunks with the same Index are an error. Chunks with empty Data
// are skipped; when no chunk has a header, Merge writes nothing. Every chunk
// that has a header must have the same one, naming scoreColumn once, and
// every score must be a finite number; errors about the data wrap
// domain.ErrInvalidArgument and name the chunk. A chunk with more than topK
// rows is not an error: only its best rows can reach the result.
//
// Merge keeps at most topK rows and reads one chunk at a time, in
// O(total rows · log topK) time. A negative topK counts as 0. Nothing is
// written unless every chunk is valid. To merge chunks that do not fit in
// memory together, give them to a Merger one at a time.
func Merge(w io.Writer, chunks []ChunkOutput, scoreColumn string, order domain.Order, topK int) (rows int, err error) {
	m, err := NewMerger(scoreColumn, order, topK)
	if err != nil {
		return 0, err
	}
	// Add chunks by index, as a Merger needs them, so that the result does
	// not depend on the order of the slice.
	byIndex := make([]int, len(chunks))
	for i := range byIndex {
		byIndex[i] = i
	}
	slices.SortFunc(byIndex, func(a, b int) int { return cmp.Compare(chunks[a].Index, chunks[b].Index) })
	for _, i := range byIndex {
		if err := m.Add(chunks[i]); err != nil {
			return 0, err
		}
	}
	return m.Finish(w)
}

// Merger is Merge for chunk outputs that arrive one at a time: the stitch
// of a job reads its chunk outputs from the database page by page, and a
// Merger holds only the best topK rows seen so far, never a whole chunk
// output once Add has returned. Its result is exactly Merge's over the
// same chunks.
type Merger struct {
	s           *scanner
	k           *keeper
	header      []string
	headerChunk int
	last        int  // the Index of the last chunk added
	added       bool // some chunk was added
}

// NewMerger returns a Merger of chunk outputs into a final CSV, with
// Merge's scoreColumn, order and topK.
func NewMerger(scoreColumn string, order domain.Order, topK int) (*Merger, error) {
	if err := checkOrder(order); err != nil {
		return nil, err
	}
	s, err := newScanner(scoreColumn)
	if err != nil {
		return nil, err
	}
	return &Merger{s: s, k: &keeper{desc: order == domain.Desc, topK: topK}}, nil
}

// Add merges the output of one chunk, whose Index must be greater than
// that of every chunk added before (so that a chunk passed twice is
// caught). c.Data is not used after Add returns. An error about the data
// wraps domain.ErrInvalidArgument and names the chunk, as Merge's do;
// after an error the Merger must not be used.
func (m *Merger) Add(c ChunkOutput) error {
	if m.added && c.Index <= m.last {
		if c.Index == m.last {
			return fmt.Errorf("table: merge: chunk %d is passed twice", c.Index)
		}
		return fmt.Errorf("table: merge: chunk %d is passed after chunk %d; chunks must come by ascending index", c.Index, m.last)
	}
	m.added, m.last = true, c.Index
	return m.merge(c)
}

// merge merges the output of one chunk, in whatever order it comes.
func (m *Merger) merge(c ChunkOutput) error {
	s := m.s
	s.start(c.Data, true, c.Index)
	defer s.src.Reset(nil) // hold no reference to c.Data
	if err := s.readHeader(); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	if m.header == nil {
		m.header, m.headerChunk = s.header, c.Index
	} else if !slices.Equal(m.header, s.header) {
		return headerMismatch(c.Index, s.header, m.headerChunk, m.header)
	}
	for row := 0; ; row++ {
		rec, score, err := s.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		m.k.offer(score, c.Index, row, rec)
	}
}

// Finish writes the final CSV of the chunks added so far — nothing when
// none had a header — and returns the number of data rows written. Call
// it once, after the last Add.
func (m *Merger) Finish(w io.Writer) (rows int, err error) {
	if m.header == nil {
		return 0, nil
	}
	best := m.k.sorted()
	cw := csv.NewWriter(w)
	if err := cw.Write(m.header); err != nil {
		return 0, fmt.Errorf("write final CSV: %w", err)
	}
	for i := range best {
		if err := cw.Write(best[i].rec); err != nil {
			return 0, fmt.Errorf("write final CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return 0, fmt.Errorf("write final CSV: %w", err)
	}
	return len(best), nil
}

// checkOrder refuses an order other than domain.Desc and domain.Asc.
func checkOrder(order domain.Order) error {
	if order != domain.Desc && order != domain.Asc {
		return domain.Invalidf("order %q must be %q or %q", order, domain.Desc, domain.Asc)
	}
	return nil
}

// headerMismatch reports that chunk a's header differs from chunk b's,
// pointing at the first difference: headers can be too long to show whole.
func headerMismatch(a int, ha []string, b int, hb []string) error {
	if len(ha) != len(hb) {
		return domain.Invalidf("chunk %d output header has %d columns (%s); chunk %d output header has %d (%s); all chunk outputs must have the same header",
			a, len(ha), quoteNames(ha), b, len(hb), quoteNames(hb))
	}
	i := 0
	for ha[i] == hb[i] {
		i++
	}
	return domain.Invalidf("chunk %d output header differs from chunk %d output header at column %d: %q vs %q; all chunk outputs must have the same header",
		a, b, i+1, ha[i], hb[i])
}

// entry is one candidate row of the final CSV.
type entry struct {
	score float64
	chunk int // the chunk's Index
	row   int // position among the chunk's data rows
	rec   []string
}

// keeper keeps the best topK rows offered to it. Until it holds topK rows
// it is an unordered slice; from then on a heap with the worst kept row on
// top, which a better row replaces.
type keeper struct {
	desc    bool
	topK    int
	entries []entry
	full    bool // entries is a heap of topK rows
}

// before reports whether a ranks ahead of b in the final CSV. It is a total
// order over entries of distinct (chunk, row). -0 == 0, so they tie on score.
func (k *keeper) before(a, b *entry) bool {
	if a.score != b.score {
		return (a.score > b.score) == k.desc
	}
	if a.chunk != b.chunk {
		return a.chunk < b.chunk
	}
	return a.row < b.row
}

// offer considers rec, a row as scanner.next returns it, for the kept
// rows. rec is normalized (NormalizeFields) and copied if kept; the caller
// may reuse it.
func (k *keeper) offer(score float64, chunk, row int, rec []string) {
	if k.topK <= 0 {
		return
	}
	cand := entry{score: score, chunk: chunk, row: row}
	if !k.full {
		NormalizeFields(rec)
		cand.rec = slices.Clone(rec)
		k.entries = append(k.entries, cand)
		if len(k.entries) == k.topK {
			heap.Init(k)
			k.full = true
		}
		return
	}
	top := &k.entries[0]
	if !k.before(&cand, top) {
		return
	}
	// Reuse the evicted row's slice: every record has the header's width.
	NormalizeFields(rec)
	top.rec = append(top.rec[:0], rec...)
	top.score, top.chunk, top.row = score, chunk, row
	heap.Fix(k, 0)
}

// sorted returns the kept rows, best first.
func (k *keeper) sorted() []entry {
	slices.SortFunc(k.entries, func(a, b entry) int {
		if k.before(&a, &b) {
			return -1
		}
		if k.before(&b, &a) {
			return 1
		}
		return 0
	})
	return k.entries
}

// The heap.Interface methods order entries worst first.

// Len is part of heap.Interface.
func (k *keeper) Len() int { return len(k.entries) }

// Less is part of heap.Interface: the worse row comes first.
func (k *keeper) Less(i, j int) bool { return k.before(&k.entries[j], &k.entries[i]) }

// Swap is part of heap.Interface.
func (k *keeper) Swap(i, j int) { k.entries[i], k.entries[j] = k.entries[j], k.entries[i] }

// Push is part of heap.Interface.
func (k *keeper) Push(x any) { k.entries = append(k.entries, x.(entry)) }

// Pop is part of heap.Interface.
func (k *keeper) Pop() any {
	n := len(k.entries) - 1
	e := k.entries[n]
	k.entries = k.entries[:n]
	return e
}
