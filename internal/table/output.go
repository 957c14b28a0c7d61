package table

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/scimesh/scimesh/internal/domain"
)

// Output is a worker's result that passed ParseOutput.
type Output struct {
	Header     []string   // the column names, in order
	ScoreIndex int        // the position of the score column in Header
	Rows       [][]string // the data rows, each len(Header) fields, in output order
	Scores     []float64  // Scores[i] is the score of Rows[i]
}

// ParseOutput checks that output is a valid chunk result for a job that keeps
// topK rows scored in scoreColumn, and returns it parsed. Output must be CSV
// with a header line that names scoreColumn exactly once, followed by at most
// topK data rows whose scores are finite numbers. A header with no rows is
// valid; empty output is not. A negative topK counts as 0. Errors wrap
// domain.ErrInvalidArgument and say what is wrong and on which line. The
// returned rows share no memory with output and stay valid after it changes.
func ParseOutput(output []byte, scoreColumn string, topK int) (*Output, error) {
	topK = max(topK, 0)
	s, err := newScanner(scoreColumn)
	if err != nil {
		return nil, err
	}
	// Every result is parsed here, most of a few rows: their reader's
	// buffer comes from a pool rather than 4 KiB of garbage each.
	s.buf = outputReaders.Get().(*bufio.Reader)
	defer func() {
		s.buf.Reset(nil)
		outputReaders.Put(s.buf)
	}()
	s.start(output, false, 0)
	if err := s.readHeader(); err != nil {
		if err == io.EOF {
			return nil, emptyOutput(scoreColumn)
		}
		return nil, err
	}
	width := len(s.header)
	// Fields of the kept rows live in one backing array, sliced into Rows
	// once it stops growing; the reader reuses its record slice.
	var (
		cells  []string
		scores []float64
	)
	if topK > 0 {
		// Size both for the rows the rest of the output can hold: at most
		// one per remaining line, and at most one field per remaining byte
		// (each field but a final one ends in a comma or a line end), so
		// neither a large topK nor a wide header allocates more than the
		// input can fill.
		rest := output[min(int(s.r.InputOffset())+s.bomBytes, len(output)):]
		maxRows := min(topK, bytes.Count(rest, []byte{'\n'})+1)
		cells = make([]string, 0, min(maxRows*width, len(rest)+maxRows))
		scores = make([]float64, 0, maxRows)
	}
	for {
		rec, score, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		// Rows past topK are still checked, so that the count in the error
		// is exact and a malformed record is reported where it is.
		if s.rows <= topK {
			NormalizeFields(rec)
			cells = append(cells, rec...)
			scores = append(scores, score)
		}
	}
	if s.rows > topK {
		return nil, domain.Invalidf("output has %d rows; top_k is %d: send at most the best %d", s.rows, topK, topK)
	}
	rows := make([][]string, len(scores))
	for i := range rows {
		rows[i] = cells[i*width : (i+1)*width : (i+1)*width]
	}
	return &Output{Header: s.header, ScoreIndex: s.scoreIndex, Rows: rows, Scores: scores}, nil
}

// bom is the UTF-8 encoding of U+FEFF, the byte order mark.
const bom = "\ufeff"

// scanner reads output CSVs record by record, from memory (ParseOutput,
// Merge) or as they stream in (TopK), and checks each record against the
// rules in the package doc. One scanner reads one output after another,
// reusing its buffers.
type scanner struct {
	scoreColumn string
	src         bytes.Reader
	buf         *bufio.Reader
	r           *csv.Reader

	// Set by start for each output.
	isChunk    bool     // the output is a chunk's, read by Merge
	chunk      int      // the chunk's index, when isChunk
	bomBytes   int      // how many bytes of leading byte order marks were dropped
	header     []string // owned by the scanner, not shared with the reader
	scoreIndex int
	rows       int // data rows read so far
}

// outputReaders are the buffered readers ParseOutput lends its scanners.
var outputReaders = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

func newScanner(scoreColumn string) (*scanner, error) {
	if err := checkScoreColumn(scoreColumn); err != nil {
		return nil, err
	}
	return &scanner{scoreColumn: scoreColumn}, nil
}

// checkScoreColumn refuses an empty score column name (see the package doc).
func checkScoreColumn(name string) error {
	if name == "" {
		return domain.Invalidf("the score column name is empty; name the column that holds the scores")
	}
	return nil
}

// emptyOutput is the error for an output without a header line, which a
// result must have (a chunk of Merge's may be empty).
func emptyOutput(scoreColumn string) error {
	return domain.Invalidf("output is empty; it needs a header line naming the column %q", scoreColumn)
}

// start makes s read data: the output of the chunk with index chunk when
// isChunk, else an output that stands alone.
func (s *scanner) start(data []byte, isChunk bool, chunk int) {
	s.src.Reset(data)
	s.startReader(&s.src, isChunk, chunk)
}

// startReader makes s read the output that r streams, as start does for one
// in memory. s.buf's size, when the caller set s.buf, is kept.
func (s *scanner) startReader(r io.Reader, isChunk bool, chunk int) {
	if s.buf == nil {
		s.buf = bufio.NewReader(r)
	} else {
		s.buf.Reset(r)
	}
	// csv.NewReader uses s.buf as it is rather than wrapping it again.
	s.r = csv.NewReader(s.buf)
	s.r.ReuseRecord = true
	// FieldsPerRecord 0: the header sets the width every record must have.
	s.isChunk, s.chunk = isChunk, chunk
	s.bomBytes = 0
	s.header = nil
	s.scoreIndex = 0
	s.rows = 0
}

// dropBOMs drops the byte order marks at the start of the output, before
// the CSV reader sees it, counting their bytes for column numbers.
func (s *scanner) dropBOMs() error {
	for {
		p, err := s.buf.Peek(len(bom))
		if string(p) == bom {
			_, _ = s.buf.Discard(len(bom))
			s.bomBytes += len(bom)
			continue
		}
		if err != nil && err != io.EOF {
			// A short output is the CSV reader's to judge; a failing
			// reader is not the output's fault.
			return fmt.Errorf("read %s: %w", s.name(), err)
		}
		return nil
	}
}

// name is how messages call the output being read.
func (s *scanner) name() string {
	if !s.isChunk {
		return "output"
	}
	return fmt.Sprintf("chunk %d output", s.chunk)
}

// readHeader reads and checks the header line. It returns io.EOF when the
// data holds no record at all.
func (s *scanner) readHeader() error {
	if err := s.dropBOMs(); err != nil {
		return err
	}
	rec, err := s.r.Read()
	if err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return s.readError(rec, err)
	}
	NormalizeFields(rec)
	s.header = slices.Clone(rec)
	for strings.HasPrefix(s.header[0], bom) {
		// A quoted first name can start with a mark that the raw trim did
		// not reach; the final CSV would write it unquoted, and its reader
		// would drop it.
		s.header[0] = s.header[0][len(bom):]
	}
	var at []int // 1-based positions of the score column
	for i, name := range s.header {
		if name == s.scoreColumn {
			at = append(at, i+1)
		}
	}
	switch len(at) {
	case 0:
		return domain.Invalidf("%s header has no column %q; its columns are %s", s.name(), s.scoreColumn, quoteNames(s.header))
	case 1:
		s.scoreIndex = at[0] - 1
	default:
		return domain.Invalidf("%s header names the score column %q %d times (columns %s); it must appear once",
			s.name(), s.scoreColumn, len(at), joinInts(at))
	}
	return nil
}

// next returns the next data row and its score, or io.EOF after the last.
// The row is valid only until the next call, and is not normalized: call
// NormalizeFields on a row that is kept, which spares the rows that are
// not (most of a long output) the scan for CR LF.
func (s *scanner) next() ([]string, float64, error) {
	rec, err := s.r.Read()
	if err != nil {
		if err == io.EOF {
			return nil, 0, io.EOF
		}
		return nil, 0, s.readError(rec, err)
	}
	s.rows++
	field := rec[s.scoreIndex]
	score, err := strconv.ParseFloat(field, 64)
	if err == nil && !math.IsNaN(score) && !math.IsInf(score, 0) {
		return rec, score, nil
	}
	// A field with a CR or LF is not a number, normalized or not; the
	// message quotes it as a kept row would hold it.
	if strings.Contains(field, "\r\n") {
		field = dropCRBeforeLF(field)
	}
	line, _ := s.r.FieldPos(0)
	switch {
	case field == "":
		return nil, 0, domain.Invalidf("%s line %d: score in column %q is empty; every row needs a finite number", s.name(), line, s.scoreColumn)
	case errors.Is(err, strconv.ErrRange):
		return nil, 0, domain.Invalidf("%s line %d: score %q in column %q is out of range for a 64-bit float", s.name(), line, field, s.scoreColumn)
	case err != nil:
		return nil, 0, domain.Invalidf("%s line %d: score %q in column %q is not a number", s.name(), line, field, s.scoreColumn)
	default:
		return nil, 0, domain.Invalidf("%s line %d: score %q in column %q is not a finite number", s.name(), line, field, s.scoreColumn)
	}
}

// readError turns an error of the CSV reader into a message for people.
func (s *scanner) readError(rec []string, err error) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		// Only a streamed output (TopK) can fail to read; that is not the
		// output's fault, so it does not wrap domain.ErrInvalidArgument.
		return fmt.Errorf("read %s: %w", s.name(), err)
	}
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return domain.Invalidf("%s line %d: record has %d fields; the header has %d", s.name(), pe.StartLine, len(rec), len(s.header))
	}
	col := pe.Column
	if pe.Line == 1 {
		col += s.bomBytes
	}
	what := "malformed CSV"
	switch {
	case errors.Is(pe.Err, csv.ErrBareQuote):
		what = `a " in an unquoted field (quote the field and double the inner quotes)`
	case errors.Is(pe.Err, csv.ErrQuote):
		what = `a quoted field is not closed, or a " inside it is not doubled`
	}
	if pe.StartLine != pe.Line {
		return domain.Invalidf("%s line %d, column %d (in the record that starts on line %d): %s", s.name(), pe.Line, col, pe.StartLine, what)
	}
	return domain.Invalidf("%s line %d, column %d: %s", s.name(), pe.Line, col, what)
}

// maxNamesShown bounds how many column names an error message lists.
const maxNamesShown = 10

// quoteNames lists names for an error message, quoted, at most maxNamesShown.
func quoteNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == maxNamesShown {
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

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// NormalizeFields drops, in place, the CRs that precede an LF inside the
// fields of rec. encoding/csv already reads a quoted CR LF as LF, but
// "\r\r\n" leaves a CR LF in the field, which its writer cannot write back:
// the reader would turn it into LF. Normalizing makes every field survive
// re-encoding, so a CSV written from such records reads back as the same
// records. Workers apply it to their output rows as the coordinator does.
func NormalizeFields(rec []string) {
	for i, f := range rec {
		if strings.Contains(f, "\r\n") {
			rec[i] = dropCRBeforeLF(f)
		}
	}
}

func dropCRBeforeLF(f string) string {
	var b strings.Builder
	b.Grow(len(f))
	crs := 0 // CRs seen but not yet written
	for i := 0; i < len(f); i++ {
		switch c := f[i]; c {
		case '\r':
			crs++
		case '\n':
			crs = 0
			b.WriteByte(c)
		default:
			for ; crs > 0; crs-- {
				b.WriteByte('\r')
			}
			b.WriteByte(c)
		}
	}
	for ; crs > 0; crs-- {
		b.WriteByte('\r')
	}
	return b.String()
}
