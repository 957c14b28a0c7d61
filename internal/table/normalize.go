package table

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/scimesh/scimesh/internal/domain"
)

// NormalizeStats describes a table that Normalize wrote.
type NormalizeStats struct {
	Rows        int64 // records, the header included
	Columns     int   // fields in every record
	Bytes       int64 // bytes written to dst
	HeaderBytes int   // bytes of the first record as written, its '\n' included
}

// Normalize reads an uploaded CSV table from src, checks it, and writes its
// canonical form to dst. It reads what encoding/csv's Reader reads with its
// defaults (RFC 4180 quoting; every record as many fields as the first;
// blank lines skipped; LF or CRLF line ends, the last one optional) and
// writes what its Writer writes (',' between fields, an LF after every
// record, fields quoted only when needed), with two rules on top, as
// ParseOutput has them: byte order marks at the start of the input and of
// the first header name are dropped, and so are CRs before an LF inside a
// field. The output differs from the Writer's in one more case: a record of
// one empty field is written as `""`, where the Writer writes an empty
// line, which reads back as no record. So the output reads back as the
// records Normalize read, and normalizing it again gives the same bytes.
//
// Normalize streams: it holds one record in memory, never the table, and
// refuses a record longer than 64 MiB, which is most often a quoted field
// that is never closed. Records that are canonical already, the common
// case, are copied through in runs as long as its window.
//
// Bad data is an error that wraps domain.ErrInvalidArgument and names the
// line where the bad record starts, and for malformed CSV also the line and
// column of the fault (lines counted by LF, as encoding/csv counts them;
// columns in bytes, byte order marks included); a table with no record at
// all is "the table is empty". Errors of src and dst are returned wrapped.
// When Normalize fails, it may have written part of the output.
func Normalize(dst io.Writer, src io.Reader) (NormalizeStats, error) {
	z := newNormalizer(dst, src, normalizeBufSize, maxRecordBytes)
	err := z.all()
	return z.stats, err
}

const (
	// normalizeBufSize is the initial input window. Large enough that call
	// overheads vanish, small enough to stay in the L2 cache.
	normalizeBufSize = 256 << 10
	// maxRecordBytes bounds one record, so that an unclosed quote early in
	// a big file fails fast instead of holding the file in memory.
	maxRecordBytes = 64 << 20
)

// errMore means the window ends inside a record and more input follows.
var errMore = errors.New("table: need more input")

// normalizer is the state of one Normalize call. The input window is
// buf[:n]; everything before pos is done, and buf[run:pos] are bytes that
// go to the output unchanged but are not yet copied anywhere. out holds
// changed output that precedes buf[run:].
type normalizer struct {
	src       io.Reader
	dst       io.Writer
	maxRecord int

	buf  []byte
	n    int
	eof  bool
	pos  int
	run  int
	out  []byte
	scr  []byte // scratch for the first header name
	reps int    // reads in a row that returned nothing

	lineBase int // the line number at buf[lineIdx]
	lineIdx  int
	bomBytes int // bytes of byte order marks dropped at the start
	width    int // fields per record; 0 until the header is read

	stats NormalizeStats
}

func newNormalizer(dst io.Writer, src io.Reader, bufSize, maxRecord int) *normalizer {
	return &normalizer{
		src: src, dst: dst, maxRecord: maxRecord,
		buf:      make([]byte, bufSize),
		out:      make([]byte, 0, bufSize),
		lineBase: 1,
	}
}

// all normalizes the whole input.
func (z *normalizer) all() error {
	if err := z.fill(); err != nil {
		return err
	}
	for {
		if z.n-z.pos < len(bom) && !z.eof {
			if err := z.fill(); err != nil {
				return err
			}
			continue
		}
		if !bytes.HasPrefix(z.buf[z.pos:z.n], []byte(bom)) {
			break
		}
		z.pos += len(bom)
		z.run = z.pos
		z.bomBytes += len(bom)
	}
	for {
		err := z.scan()
		if err == nil {
			break
		}
		if err != errMore {
			return err
		}
		if err := z.fill(); err != nil {
			return err
		}
	}
	if err := z.flush(); err != nil {
		return err
	}
	if z.stats.Rows == 0 {
		return domain.Invalidf("the table is empty")
	}
	return nil
}

// flush writes out the output up to pos.
func (z *normalizer) flush() error {
	for _, b := range [][]byte{z.out, z.buf[z.run:z.pos]} {
		if len(b) == 0 {
			continue
		}
		n, err := z.dst.Write(b)
		z.stats.Bytes += int64(n)
		if err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	z.out = z.out[:0]
	z.run = z.pos
	return nil
}

// fill flushes the output up to pos, moves the unfinished record at pos to
// the front of the window, and reads until the window is full or the input
// ends. The window grows when the record fills it.
func (z *normalizer) fill() error {
	if err := z.flush(); err != nil {
		return err
	}
	if z.pos == 0 && z.n == len(z.buf) {
		if len(z.buf) >= z.maxRecord {
			return domain.Invalidf("line %d: the record that starts here is longer than %s; is a quoted field not closed?",
				z.line(0), sizeString(z.maxRecord))
		}
		grown := make([]byte, min(2*len(z.buf), z.maxRecord))
		copy(grown, z.buf[:z.n])
		z.buf = grown
	}
	z.lineBase += bytes.Count(z.buf[z.lineIdx:z.pos], []byte{'\n'})
	z.n = copy(z.buf, z.buf[z.pos:z.n])
	z.pos, z.run, z.lineIdx = 0, 0, 0
	for z.n < len(z.buf) && !z.eof {
		m, err := z.src.Read(z.buf[z.n:])
		z.n += m
		switch {
		case err == io.EOF:
			z.eof = true
		case err != nil:
			return fmt.Errorf("read table: %w", err)
		case m > 0:
			z.reps = 0
		default:
			if z.reps++; z.reps >= 100 {
				return fmt.Errorf("read table: %w", io.ErrNoProgress)
			}
		}
	}
	return nil
}

// scan normalizes the records from pos on. It returns nil at the end of
// the input, errMore when the window ends inside a record, or the error of
// a bad record.
func (z *normalizer) scan() error {
	b := z.buf[:z.n]
	i := z.pos
	defer func() { z.pos = i }()
	for {
		if i == len(b) {
			if z.eof {
				return nil
			}
			return errMore
		}
		// Blank lines are no records.
		switch b[i] {
		case '\n':
			z.drop(i, i+1)
			i++
			continue
		case '\r':
			if i+1 < len(b) {
				if b[i+1] == '\n' {
					z.drop(i, i+2)
					i += 2
					continue
				}
			} else if z.eof {
				z.drop(i, i+1)
				i++
				continue
			} else {
				return errMore
			}
		}
		end, err := z.record(i)
		if err != nil {
			return err
		}
		i = end
		z.stats.Rows++
	}
}

// drop leaves buf[from:to] out of the output.
func (z *normalizer) drop(from, to int) {
	z.out = append(z.out, z.buf[z.run:from]...)
	z.run = to
}

// line returns the number of the line that buf[i] is on.
func (z *normalizer) line(i int) int {
	return z.lineBase + bytes.Count(z.buf[z.lineIdx:i], []byte{'\n'})
}

// fault returns the error for bad data at buf[at], in the record that
// starts at buf[start]. Columns count bytes, from 1, as in the input,
// byte order marks included.
func (z *normalizer) fault(start, at int, what string) error {
	startLine := z.line(start)
	rec := z.buf[start:at]
	line := startLine + bytes.Count(rec, []byte{'\n'})
	col := at - (start + bytes.LastIndexByte(rec, '\n') + 1) + 1
	if line == 1 {
		col += z.bomBytes
	}
	if line != startLine {
		return domain.Invalidf("line %d, column %d (in the record that starts on line %d): %s", line, col, startLine, what)
	}
	return domain.Invalidf("line %d, column %d: %s", line, col, what)
}

func sizeString(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
