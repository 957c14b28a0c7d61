package table

import (
	"bufio"
	"encoding/csv"
	"errors"
	"io"
	"strings"

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
	maxRecord   int // the longest record it reads, in bytes
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
	return &TopK{scoreColumn: scoreColumn, order: order, k: max(k, 0), maxRecord: maxRecordBytes}, nil
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
// being read are held, and a record longer than 64 MiB (most often a
// line that never ends, or a quoted field never closed) is refused as
// soon as that much of it has arrived, with no more of the output read.
func (t *TopK) Select(r io.Reader) (*Selection, error) {
	s, err := newScanner(t.scoreColumn)
	if err != nil {
		return nil, err
	}
	s.buf = bufio.NewReaderSize(nil, topKBufSize)
	in := newRecordLimit(r, t.maxRecord)
	s.startReader(in, false, 0)
	err = s.readHeader()
	if err = in.ended(s, s.header, err); err != nil {
		if err == io.EOF {
			return nil, emptyOutput(t.scoreColumn)
		}
		return nil, err
	}
	k := &keeper{desc: t.order == domain.Desc, topK: t.k}
	for row := 0; ; row++ {
		rec, score, err := s.next()
		if err = in.ended(s, rec, err); err == io.EOF {
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

// errRecordTooLong ends the output that TopK.Select reads when one record
// runs past its bound.
var errRecordTooLong = errors.New("table: the record is too long")

// recordLimit is the output TopK.Select reads, bounded so that a record
// without an end cannot make it read, and hold, more than max bytes of
// it: it fails with errRecordTooLong past the current record's start plus
// max and the size of the reader's buffer, which reads ahead of the
// record. ended checks each record's exact length and moves the limit on.
type recordLimit struct {
	r     io.Reader
	max   int64
	n     int64 // bytes read so far
	limit int64
	start int64 // where the current record starts
	line  int   // the line the record before it ended on; 0 before the header
}

func newRecordLimit(r io.Reader, max int) *recordLimit {
	return &recordLimit{r: r, max: int64(max), limit: int64(max) + topKBufSize}
}

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.n >= l.limit {
		return 0, errRecordTooLong
	}
	if left := l.limit - l.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

// ended is called with what s read of a record, rec and err, and returns
// err, or the error for a record longer than the bound (which it is, too,
// when an error stopped its reading past the bound).
func (l *recordLimit) ended(s *scanner, rec []string, err error) error {
	end := int64(s.bomBytes) + s.r.InputOffset()
	if errors.Is(err, errRecordTooLong) || err != io.EOF && end-l.start > l.max {
		if l.line == 0 {
			return domain.Invalidf("output line 1: the header is longer than %s; is a quoted field not closed?", sizeString(int(l.max)))
		}
		return domain.Invalidf("output: the record after line %d is longer than %s; does a line never end, or is a quoted field not closed?", l.line, sizeString(int(l.max)))
	}
	if err == nil {
		first, _ := s.r.FieldPos(len(rec) - 1)
		l.line = first + strings.Count(rec[len(rec)-1], "\n")
	}
	l.start = end
	l.limit = end + l.max + topKBufSize
	return err
}
