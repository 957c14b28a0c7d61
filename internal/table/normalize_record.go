package table

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode"
	"unicode/utf8"

	"github.com/scimesh/scimesh/internal/domain"
)

// Messages for malformed CSV.
const (
	msgBareQuote = `a " in an unquoted field (quote the field and double the inner quotes)`
	msgStray     = `a " inside a quoted field is not doubled, or text follows the closing quote`
	msgUnclosed  = "a quoted field starts here and is not closed by the end of the file"
)

// Byte classes. Read-only after initialization.
var (
	// unquotedStop marks the bytes that end a run of plain bytes in a
	// field: in an unquoted field they end it or are errors, in a quoted
	// one they make it need its quotes or end it.
	unquotedStop = byteSet(",\n\r\"")
	// fieldRisk marks the bytes that, first in a field, may make the
	// Writer quote it; startNeedsQuotes decides.
	fieldRisk = func() [256]bool {
		t := byteSet("\" \t\v\f\\")
		for c := utf8.RuneSelf; c < 256; c++ {
			t[c] = true
		}
		return t
	}()
	// needsQuoteByte marks the bytes whose presence makes encoding/csv's
	// Writer quote a field.
	needsQuoteByte = byteSet(",\n\r\"")
)

func byteSet(s string) (t [256]bool) {
	for i := 0; i < len(s); i++ {
		t[s[i]] = true
	}
	return t
}

// record normalizes the record that starts at buf[start] and returns where
// the next record starts. A field that is canonical already stays in the
// run of bytes copied as they are; any other field is an edit: the run is
// cut before it, and its canonical form appended to out. So is a line end
// that is not a lone LF. When the window ends inside the record and more
// input may follow, record returns errMore and leaves out and run as they
// were; so it does for a bad record, and returns its error.
func (z *normalizer) record(start int) (int, error) {
	b := z.buf[:z.n]
	mark, runMark := len(z.out), z.run
	header := z.width == 0
	i := start
	for field := 1; ; field++ {
		var (
			j   int // the field's delimiter
			err error
		)
		if i < len(b) && b[i] == '"' {
			j, err = z.quotedField(b, start, i, field == 1, header && field == 1)
		} else {
			j, err = z.unquotedField(b, start, i, field == 1, header && field == 1)
		}
		if err == nil && j < len(b) && b[j] == ',' {
			i = j + 1
			continue
		}
		if err == nil && !header && field != z.width {
			err = domain.Invalidf("line %d: record has %d fields; the header has %d", z.line(start), field, z.width)
		}
		if err != nil {
			z.out, z.run = z.out[:mark], runMark
			return 0, err
		}

		end := j
		switch {
		case j == len(b): // the end of the input
			z.drop(j, j)
			z.out = append(z.out, '\n')
		case b[j] == '\n':
			end++
		case j+1 < len(b): // CR LF
			z.drop(j, j+1)
			end += 2
		default: // a CR at the end of the input
			z.drop(j, j+1)
			z.out = append(z.out, '\n')
			end++
		}
		if header {
			z.width = field
			z.stats.Columns = field
			// What this record added to the output: out since mark and
			// the run up to end, less the run that was pending at start.
			z.stats.HeaderBytes = len(z.out) - mark + (end - z.run) - (start - runMark)
		}
		return end, nil
	}
}

// quotedField normalizes the quoted field at b[q], in the record that
// starts at b[start], and returns the index of its delimiter: a comma, an
// LF, a CR before an LF or at the end of the input, or len(b) at the end of
// the input. first says the field is its record's first, name that it is
// the header's first.
func (z *normalizer) quotedField(b []byte, start, q int, first, name bool) (int, error) {
	escaped, special, crlf := false, false, false
	j := q + 1
	for {
		j = skipPlain(b, j)
		if j == len(b) {
			if z.eof {
				return 0, z.fault(start, q, msgUnclosed)
			}
			return 0, errMore
		}
		c := b[j]
		j++
		if c != '"' {
			special = true
			crlf = crlf || c == '\n' && b[j-2] == '\r'
			continue
		}
		if j == len(b) && !z.eof {
			return 0, errMore // the next byte may double the quote
		}
		if j == len(b) || b[j] != '"' {
			break
		}
		escaped = true
		j++
	}
	// The closing quote is b[j-1].
	if j < len(b) {
		switch b[j] {
		case ',', '\n':
		case '\r':
			if j+1 == len(b) && !z.eof {
				return 0, errMore
			}
			if j+1 < len(b) && b[j+1] != '\n' {
				return 0, z.fault(start, j-1, msgStray)
			}
		default:
			return 0, z.fault(start, j-1, msgStray)
		}
	}
	f := b[q+1 : j-1]
	only := first && (j == len(b) || b[j] != ',')
	switch {
	case name:
		z.drop(q, j)
		z.appendFirstName(b[q:j], true, only)
	case !escaped && !special && !(len(f) == 0 && only) && !startNeedsQuotes(f):
		// Needless quotes.
		z.drop(q, j)
		z.out = append(z.out, f...)
	case crlf:
		z.drop(q, j)
		z.out = append(z.out, '"')
		z.out = appendDropCR(z.out, f)
		z.out = append(z.out, '"')
	}
	return j, nil
}

// unquotedField normalizes the unquoted field at b[i], in the record that
// starts at b[start], and returns the index of its delimiter, as
// quotedField does.
func (z *normalizer) unquotedField(b []byte, start, i int, first, name bool) (int, error) {
	hasCR := false
	j := i
	for {
		j = skipPlain(b, j)
		if j == len(b) {
			if !z.eof {
				return 0, errMore
			}
			break
		}
		c := b[j]
		if c == ',' || c == '\n' {
			break
		}
		if c == '"' {
			return 0, z.fault(start, j, msgBareQuote)
		}
		// A CR ends the line before an LF or at the end of the input, and
		// is data anywhere else.
		if j+1 == len(b) {
			if !z.eof {
				return 0, errMore
			}
			break
		}
		if b[j+1] == '\n' {
			break
		}
		hasCR = true
		j++
	}
	f := b[i:j]
	switch {
	case name:
		z.drop(i, j)
		z.appendFirstName(f, false, first && (j == len(b) || b[j] != ','))
	case hasCR || len(f) > 0 && fieldRisk[f[0]] && startNeedsQuotes(f):
		z.drop(i, j)
		z.out = append(z.out, '"')
		z.out = append(z.out, f...) // no quotes to double
		z.out = append(z.out, '"')
	}
	return j, nil
}

// skipPlain returns the index of the first byte of b[i:] in unquotedStop,
// or len(b). It looks at 8 bytes at a time: plain text, the common case,
// costs a few operations a word.
func skipPlain(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// The lowest set bit of each term marks the first byte of x below
		// 0x0e (LF, CR and rare control bytes), the first comma, and the
		// first quote; their union marks the first of all.
		m := (x-swarLo*0x0e)&^x | hasZero(x^(swarLo*',')) | hasZero(x^(swarLo*'"'))
		if m &= swarHi; m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			if unquotedStop[b[i]] {
				return i
			}
			i -= 7 // a plain control byte: look on from the next
		}
	}
	for i < len(b) && !unquotedStop[b[i]] {
		i++
	}
	return i
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// hasZero has, for the first zero byte of x, its high bit set, and no bit
// of a lower byte. Bits of higher bytes may be set too.
func hasZero(x uint64) uint64 {
	return (x - swarLo) &^ x
}

// startNeedsQuotes reports whether encoding/csv's Writer quotes field f,
// which holds no comma, quote, CR or LF, because f is `\.` or starts with
// a space. Callers on hot paths check first that f starts with a byte in
// fieldRisk.
func startNeedsQuotes(f []byte) bool {
	if len(f) == 0 || !fieldRisk[f[0]] {
		return false
	}
	if f[0] < utf8.RuneSelf {
		switch f[0] {
		case ' ', '\t', '\v', '\f':
			return true
		case '\\':
			return len(f) == 2 && f[1] == '.'
		}
		return false
	}
	r, _ := utf8.DecodeRune(f)
	return unicode.IsSpace(r)
}

// appendFirstName appends the first field of the header, raw as in the
// input, without the byte order marks it starts with.
func (z *normalizer) appendFirstName(raw []byte, quoted, only bool) {
	f := raw
	if quoted {
		z.scr = appendDropCR(z.scr[:0], raw[1:len(raw)-1])
		f = bytes.ReplaceAll(z.scr, []byte(`""`), []byte(`"`))
	}
	for bytes.HasPrefix(f, []byte(bom)) {
		f = f[len(bom):]
	}
	z.out = appendField(z.out, f, only)
}

// appendField appends field f as encoding/csv's Writer writes it, but for
// a record's only field, which is quoted when empty.
func appendField(out, f []byte, only bool) []byte {
	if len(f) == 0 {
		if only {
			return append(out, `""`...)
		}
		return out
	}
	if !needsQuotes(f) {
		return append(out, f...)
	}
	out = append(out, '"')
	for {
		i := bytes.IndexByte(f, '"')
		if i < 0 {
			break
		}
		out = append(out, f[:i+1]...)
		out = append(out, '"')
		f = f[i+1:]
	}
	out = append(out, f...)
	return append(out, '"')
}

// needsQuotes reports whether encoding/csv's Writer quotes field f: when it
// holds a comma, a quote, a CR or an LF, is `\.`, or starts with a space.
func needsQuotes(f []byte) bool {
	for _, c := range f {
		if needsQuoteByte[c] {
			return true
		}
	}
	return startNeedsQuotes(f)
}

// appendDropCR appends f without the CRs that come before an LF.
func appendDropCR(out, f []byte) []byte {
	for {
		i := bytes.IndexByte(f, '\n')
		if i < 0 {
			return append(out, f...)
		}
		out = append(out, bytes.TrimRight(f[:i], "\r")...)
		out = append(out, '\n')
		f = f[i+1:]
	}
}
