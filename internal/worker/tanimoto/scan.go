package tanimoto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// ctxEvery is how many rows Scan scores between looks at its context: a
// few milliseconds of work at most, so that a cancelled task stops at once.
const ctxEvery = 4096

// Column names of the input.
const (
	idColumn          = "id"
	fingerprintColumn = "fingerprint"
)

// Scan reads a chunk from in and calls fn with the id and score of every
// data row, in input order. When hasHeader, the first record is the header
// and names the columns "id" and "fingerprint"; otherwise they are the
// first two. id is the id field's value with any CSV quoting removed; it is
// valid only until fn returns. An error from fn stops Scan and is returned
// as it is. Scan looks at ctx every few thousand rows and returns its error
// once it is done.
//
// Errors about the chunk wrap ErrBadInput and name the line, counting from
// 1 with the header line included.
func (q *Query) Scan(ctx context.Context, hasHeader bool, in io.Reader, fn func(id []byte, score float64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := newReader(in)
	idIdx, fpIdx := 0, 1
	if hasHeader {
		var err error
		idIdx, fpIdx, err = readHeader(r)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	need := max(idIdx, fpIdx) + 1
	// The fast path reads "id,fingerprint" lines without quotes; any other
	// line goes through split, which knows CSV.
	fast := idIdx == 0 && fpIdx == 1
	words := make([]uint64, len(q.words))
	for rows := 1; ; rows++ {
		if rows%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, lineNo, err := r.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return readError(err)
		}
		if fast {
			// A fingerprint of the right length that decodes as hex holds
			// no comma and no quote, so the line is exactly two unquoted
			// fields when the id holds no quote either.
			if i := bytes.IndexByte(line, ','); i >= 0 && len(line)-i-1 == q.digits &&
				bytes.IndexByte(line[:i], '"') < 0 && decodeHex(words, line[i+1:]) {
				if err := fn(line[:i], Similarity(q.words, words)); err != nil {
					return err
				}
				continue
			}
		}
		fields, err := r.split(line, lineNo, need)
		if err != nil {
			return err
		}
		if len(fields) < need {
			return missingColumn(lineNo, len(fields), idIdx, fpIdx)
		}
		fp := fields[fpIdx]
		if len(fp) != q.digits {
			return fmt.Errorf("%w: line %d: fingerprint is %d hex digits long; the query is %d", ErrBadInput, lineNo, len(fp), q.digits)
		}
		if !decodeHex(words, fp) {
			return fmt.Errorf("%w: line %d: fingerprint is not hex: %s", ErrBadInput, lineNo, hexProblem(fp))
		}
		if err := fn(fields[idIdx], Similarity(q.words, words)); err != nil {
			return err
		}
	}
}

// readHeader reads the header record and returns the positions of the id
// and fingerprint columns. It returns io.EOF when the input is empty.
func readHeader(r *reader) (idIdx, fpIdx int, err error) {
	line, lineNo, err := r.next()
	if err == io.EOF {
		return 0, 0, io.EOF
	}
	if err != nil {
		return 0, 0, readError(err)
	}
	fields, err := r.split(line, lineNo, 0)
	if err != nil {
		return 0, 0, err
	}
	idIdx, fpIdx = -1, -1
	for i, f := range fields {
		var p *int
		switch string(f) {
		case idColumn:
			p = &idIdx
		case fingerprintColumn:
			p = &fpIdx
		default:
			continue
		}
		if *p >= 0 {
			return 0, 0, fmt.Errorf("%w: line %d: the header names the column %q twice", ErrBadInput, lineNo, f)
		}
		*p = i
	}
	for _, c := range []struct {
		name string
		idx  int
	}{{idColumn, idIdx}, {fingerprintColumn, fpIdx}} {
		if c.idx < 0 {
			return 0, 0, fmt.Errorf("%w: line %d: the header has no column %q; the tanimoto workload reads the columns %q and %q",
				ErrBadInput, lineNo, c.name, idColumn, fingerprintColumn)
		}
	}
	return idIdx, fpIdx, nil
}

// readError words an error of the reader: the chunk's fault as it is,
// else a failure to read it.
func readError(err error) error {
	if errors.Is(err, ErrBadInput) {
		return err
	}
	return fmt.Errorf("read chunk: %w", err)
}

func missingColumn(lineNo, fields, idIdx, fpIdx int) error {
	name, idx := fingerprintColumn, fpIdx
	if idIdx > fpIdx {
		name, idx = idColumn, idIdx
	}
	unit := "fields"
	if fields == 1 {
		unit = "field"
	}
	return fmt.Errorf("%w: line %d: the record has %d %s; the %s is column %d", ErrBadInput, lineNo, fields, unit, name, idx+1)
}
