package table

import (
	"bufio"
	"encoding/csv"
	"io"

	"github.com/scimesh/scimesh/internal/domain"
)

// topKBufSize is the read buffer of TopK.Select: a workload's output comes
// through a pipe, in writes of whatever size the command makes.
const topKBufSize = 64 << 10

// TopK selects the best rows of one output CSV as it streams in: a worker
// runs a workload's output through it and sends what it keeps, which
// ParseOutput then accepts. A TopK holds only its settings, so it may serve
// several outputs, concurrently too.
type TopK struct {
	scoreColumn string
	order       domain.Order
	k           int
}

// NewTopK returns a TopK that keeps the best k rows by the score in
// scoreColumn, in order (domain.Desc: higher first; domain.Asc: lower
// first). A negative k counts as 0. Errors about the settings wrap
// domain.ErrInvalidArgument.
func NewTopK(scoreColumn string, order domain.Order, k int) (*TopK, error) {
	if err := checkScoreColumn(scoreColumn); err != nil {
		return nil, err
	}
	if err := checkOrder(order); err != nil {
		return nil, err
	}
	return &TopK{scoreColumn: scoreColumn, order: order, k: max(k, 0)}, nil
}

// Selection is what TopK.Select kept of an output.
type Selection struct {
	Header     []string   // the column names, in order
	ScoreIndex int        // the position of the score column in Header
	Rows       [][]string // the best rows, best first, each len(Header) fields
	Scores     []float64  // Scores[i] is the score of Rows[i]
	RowsRead   int        // the output's data rows, kept or not
}

// Select reads the output CSV that r streams, to its end, and returns its
// best rows: ranked by score in the TopK's order, ties to the earlier row.
// It checks every record by the rules ParseOutput applies, with the same
// messages (wrapping domain.ErrInvalidArgument, naming the line), so a bad
// output is refused at the first bad record; an error of r itself is
// returned wrapped, without domain.ErrInvalidArgument. Memory stays
// O(k rows) however long the output: only the kept rows and the record
// being read are held.
func (t *TopK) Select(r io.Reader) (*Selection, error) {
	s, err := newScanner(t.scoreColumn)
	if err != nil {
		return nil, err
	}
	s.buf = bufio.NewReaderSize(nil, topKBufSize)
	s.startReader(r, false, 0)
	if err := s.readHeader(); err != nil {
		if err == io.EOF {
			return nil, emptyOutput(t.scoreColumn)
		}
		return nil, err
	}
	k := &keeper{desc: t.order == domain.Desc, topK: t.k}
	for row := 0; ; row++ {
		rec, score, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		k.offer(score, 0, row, rec)
	}
	best := k.sorted()
	sel := &Selection{
		Header:     s.header,
		ScoreIndex: s.scoreIndex,
		Rows:       make([][]string, len(best)),
		Scores:     make([]float64, len(best)),
		RowsRead:   s.rows,
	}
	for i := range best {
		sel.Rows[i], sel.Scores[i] = best[i].rec, best[i].score
	}
	return sel, nil
}

// WriteCSV writes the selection to w as encoding/csv's writer does: the
// header, then the rows best first. ParseOutput reads it back as the same
// header and rows.
func (s *Selection) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(s.Header); err != nil {
		return err
	}
	return cw.WriteAll(s.Rows)
}
