package tanimoto

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
)

// readBufferSize is the bufio buffer of the input: large enough that a
// chunk streams through in few reads and that nearly every line is returned
// in place, small enough to stay in a core's L2 cache.
const readBufferSize = 256 << 10

// MaxRecordBytes bounds one record of a chunk, its line ends included: 1
// MiB. A row is an id and a fingerprint (a 2048-bit fingerprint is 512 hex
// digits, the longest in common use 4096), and maybe other columns, so a
// longer record is a line that never ends or a quoted field never closed:
// refused, so that the reader never holds more than a few MiB.
const MaxRecordBytes = 1 << 20

// reader reads CSV records line by line, the way encoding/csv reads them
// with its defaults, returning fields as byte slices into its own buffers.
type reader struct {
	br     *bufio.Reader
	lines  int      // lines read so far; the next line is lines+1
	bomOK  bool     // the next line is the first: drop a byte order mark
	long   []byte   // a line longer than br's buffer
	rec    []byte   // the text of a record that holds a quote
	fields [][]byte // the current record's fields
	unq    []byte   // the unquoted contents of quoted fields
}

func newReader(in io.Reader) *reader {
	return &reader{br: bufio.NewReaderSize(in, readBufferSize), bomOK: true}
}

// readLine returns the next line without its line end: "\n", "\r\n", or a
// final "\r" before the end of the input, as encoding/csv drops them. The
// line is valid until the next call. At the end of the input it returns
// io.EOF; a line longer than MaxRecordBytes is an error that wraps
// ErrBadInput, returned once that much of it was read.
func (r *reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > MaxRecordBytes {
				return nil, tooLong(r.lines + 1)
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if len(line) > MaxRecordBytes {
		return nil, tooLong(r.lines + 1)
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	r.lines++
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if r.bomOK {
		r.bomOK = false
		line = bytes.TrimPrefix(line, []byte("\ufeff"))
	}
	return line, nil
}

// next returns the next non-blank line and its line number, for the caller
// to try its fast path on before it asks for the line's fields.
func (r *reader) next() (line []byte, lineNo int, err error) {
	for {
		line, err = r.readLine()
		if err != nil {
			return nil, 0, err
		}
		if len(line) > 0 {
			return line, r.lines, nil
		}
	}
}

// split returns the fields of the record that starts with line, which next
// returned and which must still be valid, reading further lines when a
// quoted field spans them. When need > 0, fields past the first need may be
// left out. Errors about the CSV wrap ErrBadInput and name the record's
// first line.
func (r *reader) split(line []byte, lineNo, need int) ([][]byte, error) {
	if bytes.IndexByte(line, '"') < 0 {
		fields := r.fields[:0]
		for need <= 0 || len(fields) < need {
			i := bytes.IndexByte(line, ',')
			if i < 0 {
				fields = append(fields, line)
				break
			}
			fields = append(fields, line[:i])
			line = line[i+1:]
		}
		r.fields = fields
		return fields, nil
	}

	// A line end is the record's end when the quotes before it pair up:
	// a quoted field, its escaped quotes included, has an even number.
	r.rec = append(r.rec[:0], line...)
	quotes := bytes.Count(line, []byte{'"'})
	for quotes%2 == 1 {
		more, err := r.readLine()
		if err == io.EOF {
			break // an unterminated quoted field; splitQuoted says so
		}
		if errors.Is(err, ErrBadInput) {
			return nil, tooLong(lineNo) // a line of the record is too long
		}
		if err != nil {
			return nil, err
		}
		r.rec = append(append(r.rec, '\n'), more...)
		if len(r.rec) > MaxRecordBytes {
			return nil, tooLong(lineNo)
		}
		quotes += bytes.Count(more, []byte{'"'})
	}
	fields, unq, err := splitQuoted(r.fields[:0], r.unq[:0], r.rec)
	r.fields, r.unq = fields, unq
	if err != nil {
		return nil, fmt.Errorf("%w: line %d: malformed CSV: %w", ErrBadInput, lineNo, err)
	}
	return fields, nil
}

// tooLong is the error for a record longer than MaxRecordBytes that
// starts on line lineNo.
func tooLong(lineNo int) error {
	return fmt.Errorf("%w: line %d: the record that starts here is longer than %d MiB, the most the tanimoto workload reads; does a line never end, or is a quoted field not closed?",
		ErrBadInput, lineNo, MaxRecordBytes>>20)
}

// splitQuoted splits one CSV record, which may hold quoted fields, into its
// fields, appending them to dst and their unquoted contents to unq. rec is
// the record's text without its final line end; any line end inside it
// must be a plain "\n". The rules are encoding/csv's with LazyQuotes off: a
// field that starts with a quote ends at a quote followed by a comma or the
// end of the record, a doubled quote inside it is one quote, and any other
// quote is an error (csv.ErrBareQuote in an unquoted field, csv.ErrQuote
// after a closing quote or when none comes).
func splitQuoted(dst [][]byte, unq, rec []byte) ([][]byte, []byte, error) {
	// Unquoted contents are never longer than the record, so with this
	// capacity unq does not move and fields may point into it at once.
	if cap(unq) < len(rec) {
		unq = make([]byte, 0, len(rec))
	}
	pos := 0
	for {
		if pos < len(rec) && rec[pos] == '"' {
			start := len(unq)
			pos++
			for {
				i := bytes.IndexByte(rec[pos:], '"')
				if i < 0 {
					return dst, unq, csv.ErrQuote
				}
				unq = append(unq, rec[pos:pos+i]...)
				pos += i + 1
				if pos < len(rec) && rec[pos] == '"' {
					unq = append(unq, '"')
					pos++
					continue
				}
				break
			}
			dst = append(dst, unq[start:len(unq):len(unq)])
			if pos == len(rec) {
				break
			}
			if rec[pos] != ',' {
				return dst, unq, csv.ErrQuote
			}
			pos++
			continue
		}
		end := len(rec)
		if i := bytes.IndexByte(rec[pos:], ','); i >= 0 {
			end = pos + i
		}
		if bytes.IndexByte(rec[pos:end], '"') >= 0 {
			return dst, unq, csv.ErrBareQuote
		}
		dst = append(dst, rec[pos:end:end])
		if end == len(rec) {
			break
		}
		pos = end + 1
	}
	return dst, unq, nil
}
