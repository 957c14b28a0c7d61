package tanimoto

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// writeBufferSize is the bufio buffer of the output.
const writeBufferSize = 256 << 10

// outputHeader is the output's header line.
const outputHeader = "id,score\n"

// Run is the workload: it scores the chunk in against the query in params
// and writes to out the CSV "id,score" with a header and one row per input
// row, in input order (see the package comment). params is the task's
// parameters, a JSON object with the member "query"; hasHeader says whether
// the chunk's first record is a header.
//
// Errors that the parameters or the chunk cause wrap ErrBadInput; a
// cancelled ctx stops Run within a few thousand rows with ctx's error. On
// any error out may hold part of the output.
func Run(ctx context.Context, params json.RawMessage, hasHeader bool, in io.Reader, out io.Writer) error {
	q, err := ParseQuery(params)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, writeBufferSize)
	if _, err := w.WriteString(outputHeader); err != nil {
		return err
	}
	scores := new(scoreCache)
	err = q.Scan(ctx, hasHeader, in, func(id []byte, score float64) error {
		_, err := w.Write(scores.appendRow(w.AvailableBuffer(), id, score))
		return err
	})
	if err != nil {
		return err
	}
	return w.Flush()
}

// appendField appends f as one CSV field, quoted exactly when
// encoding/csv's Writer (comma ',', UseCRLF off) quotes it: when it holds a
// comma, quote, CR or LF, is `\.`, or starts with a Unicode space. Inside
// quotes a quote is doubled; everything else is copied.
func appendField(dst, f []byte) []byte {
	if !needsQuotes(f) {
		return append(dst, f...)
	}
	dst = append(dst, '"')
	for {
		i := bytes.IndexByte(f, '"')
		if i < 0 {
			break
		}
		dst = append(dst, f[:i+1]...)
		dst = append(dst, '"')
		f = f[i+1:]
	}
	dst = append(dst, f...)
	return append(dst, '"')
}

func needsQuotes(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	if len(f) == 2 && f[0] == '\\' && f[1] == '.' {
		return true
	}
	for _, c := range f {
		if c == ',' || c == '"' || c == '\r' || c == '\n' {
			return true
		}
	}
	r, _ := utf8.DecodeRune(f)
	return unicode.IsSpace(r)
}

// scoreCacheBits sets the size of a scoreCache: 2^10 entries, 32 KiB.
const scoreCacheBits = 10

// scoreCache remembers the text of recently formatted scores. A chunk's
// scores are ratios of small integers, the same few thousand over and over,
// and copying a remembered text is several times faster than formatting a
// float64 anew.
type scoreCache [1 << scoreCacheBits]struct {
	key  uint64 // math.Float64bits(score)+1; 0 is an empty entry
	n    uint8
	text [23]byte
}

// appendRow appends to dst one output row, "id,score\n", and returns the
// extended slice. The id is quoted as encoding/csv's writer would quote it,
// and the score is written as strconv.AppendFloat(score, 'g', -1, 64)
// writes it.
func (c *scoreCache) appendRow(dst, id []byte, score float64) []byte {
	dst = appendField(dst, id)
	dst = append(dst, ',')
	dst = c.appendScore(dst, score)
	return append(dst, '\n')
}

// appendScore appends the text of score to dst.
func (c *scoreCache) appendScore(dst []byte, score float64) []byte {
	key := math.Float64bits(score) + 1
	e := &c[key*0x9e3779b97f4a7c15>>(64-scoreCacheBits)]
	if e.key == key {
		return append(dst, e.text[:e.n]...)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, score, 'g', -1, 64)
	if n := len(dst) - start; n <= len(e.text) {
		e.key, e.n = key, uint8(n)
		copy(e.text[:], dst[start:])
	}
	return dst
}
