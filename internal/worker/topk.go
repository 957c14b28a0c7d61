package worker

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/scimesh/scimesh/internal/table"
)

// bom is the UTF-8 byte order mark, dropped from the start of an output.
const bom = "\ufeff"

// topK reads a workload's output — CSV with a header line naming the score
// column — row by row, and keeps the best k rows by score in a bounded heap:
// memory stays O(k) however long the output. Its rules are the
// coordinator's for a chunk result, so that what it keeps is accepted:
// the header names the score column exactly once, every row has as many
// fields as the header, every score is a finite number (strconv.ParseFloat,
// no spaces), a leading byte order mark is dropped, and CRs that precede an
// LF inside a field are dropped.
type topK struct {
	scoreColumn string
	desc        bool
	k           int

	header     []string
	scoreIndex int
	rows       int // data rows read
	kept       rowHeap
}

// keptRow is a row of the output that may reach the result.
type keptRow struct {
	score float64
	seq   int // position among the output's data rows: earlier wins ties
	rec   []string
}

func newTopK(scoreColumn, order string, k int) (*topK, error) {
	if scoreColumn == "" {
		return nil, errors.New("the job's score column name is empty")
	}
	if order != "desc" && order != "asc" {
		return nil, fmt.Errorf("the job's order is %q; want desc or asc", order)
	}
	t := &topK{scoreColumn: scoreColumn, desc: order == "desc", k: max(k, 0)}
	t.kept.better = t.better
	return t, nil
}

// better reports whether a ranks ahead of b: a better score in the job's
// order, or the same score and an earlier row.
func (t *topK) better(a, b *keptRow) bool {
	if a.score != b.score {
		if t.desc {
			return a.score > b.score
		}
		return a.score < b.score
	}
	return a.seq < b.seq
}

// read consumes the whole output from r. Its errors say what is wrong and
// on which line of the output.
func (t *topK) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		p, err := br.Peek(len(bom))
		if err != nil || string(p) != bom {
			break
		}
		_, _ = br.Discard(len(bom))
	}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	rec, err := cr.Read()
	if err == io.EOF {
		return fmt.Errorf("the output is empty: write CSV to stdout with a header line naming the score column %q", t.scoreColumn)
	}
	if err != nil {
		return csvError(err)
	}
	table.NormalizeFields(rec)
	t.header = slices.Clone(rec)
	t.header[0] = strings.TrimLeft(t.header[0], bom)
	t.scoreIndex = -1
	for i, name := range t.header {
		if name != t.scoreColumn {
			continue
		}
		if t.scoreIndex >= 0 {
			return fmt.Errorf("output header names the score column %q twice (columns %d and %d); it must appear once", t.scoreColumn, t.scoreIndex+1, i+1)
		}
		t.scoreIndex = i
	}
	if t.scoreIndex < 0 {
		return fmt.Errorf("output header has no column %q (the job's score column); its columns are %s", t.scoreColumn, quoteList(t.header))
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvError(err)
		}
		t.rows++
		field := rec[t.scoreIndex]
		score, err := strconv.ParseFloat(field, 64)
		if err != nil || math.IsNaN(score) || math.IsInf(score, 0) {
			line, _ := cr.FieldPos(t.scoreIndex)
			return fmt.Errorf("output line %d: score %q in column %q is not a finite number", line, field, t.scoreColumn)
		}
		t.offer(score, rec)
	}
}

// offer keeps the row when it ranks among the best k so far. Rows come in
// output order, so a row that only ties the worst kept row loses to it.
func (t *topK) offer(score float64, rec []string) {
	if t.k == 0 {
		return
	}
	row := keptRow{score: score, seq: t.rows}
	if t.kept.Len() == t.k {
		if !t.better(&row, &t.kept.rows[0]) {
			return
		}
		table.NormalizeFields(rec)
		row.rec = slices.Clone(rec)
		t.kept.rows[0] = row
		heap.Fix(&t.kept, 0)
		return
	}
	table.NormalizeFields(rec)
	row.rec = slices.Clone(rec)
	heap.Push(&t.kept, row)
}

// csv returns the kept rows, best first, as CSV with the output's header,
// written by encoding/csv.
func (t *topK) csv() ([]byte, error) {
	rows := slices.Clone(t.kept.rows)
	slices.SortFunc(rows, func(a, b keptRow) int {
		if t.better(&a, &b) {
			return -1
		}
		return 1
	})
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(t.header); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if err := w.Write(r.rec); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// rowHeap holds the kept rows with the worst on top, so that a better row
// replaces it in O(log k).
type rowHeap struct {
	rows   []keptRow
	better func(a, b *keptRow) bool
}

func (h *rowHeap) Len() int           { return len(h.rows) }
func (h *rowHeap) Less(i, j int) bool { return h.better(&h.rows[j], &h.rows[i]) }
func (h *rowHeap) Swap(i, j int)      { h.rows[i], h.rows[j] = h.rows[j], h.rows[i] }
func (h *rowHeap) Push(x any)         { h.rows = append(h.rows, x.(keptRow)) }
func (h *rowHeap) Pop() any {
	last := h.rows[len(h.rows)-1]
	h.rows = h.rows[:len(h.rows)-1]
	return last
}

// csvError words an error of the CSV reader for an operator.
func csvError(err error) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("read output: %w", err)
	}
	switch {
	case errors.Is(pe.Err, csv.ErrFieldCount):
		return fmt.Errorf("output line %d: the record has a different number of fields than the header", pe.StartLine)
	case errors.Is(pe.Err, csv.ErrBareQuote):
		return fmt.Errorf(`output line %d, column %d: a " in an unquoted field (quote the field and double the inner quotes)`, pe.Line, pe.Column)
	case errors.Is(pe.Err, csv.ErrQuote):
		return fmt.Errorf(`output line %d, column %d: a quoted field is not closed, or a " inside it is not doubled`, pe.Line, pe.Column)
	}
	return fmt.Errorf("output line %d: malformed CSV: %w", pe.Line, pe.Err)
}

// quoteList lists names for a message, at most ten.
func quoteList(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	return b.String()
}
