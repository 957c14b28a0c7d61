package table

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// The differential tests hold Normalize to a reference built from
// encoding/csv's Reader and Writer, with the package's rules on top.

// refFault is a rejection as encoding/csv reports it, in the terms that
// Normalize's messages use.
type refFault struct {
	kind      string // "fields", "bare", "quote" (a stray quote) or "eof" (a quote not closed)
	startLine int    // where the record starts
	line, col int    // where the fault is; for "bare" and "quote" only
	got, want int    // field counts; for "fields" only
}

// reference normalizes in with encoding/csv. It returns the output and the
// records read, or the fault of the first bad record.
func reference(in []byte) ([]byte, int64, *refFault) {
	trimmed := in
	for bytes.HasPrefix(trimmed, []byte(bom)) {
		trimmed = trimmed[len(bom):]
	}
	bomBytes := len(in) - len(trimmed)
	r := csv.NewReader(bytes.NewReader(trimmed))
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	var rows int64
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				panic(err) // reading memory does not fail
			}
			return nil, 0, classify(trimmed, bomBytes, pe, len(rec), r.FieldsPerRecord)
		}
		NormalizeFields(rec)
		if rows == 0 {
			for strings.HasPrefix(rec[0], bom) {
				rec[0] = rec[0][len(bom):]
			}
		}
		if len(rec) == 1 && rec[0] == "" {
			w.Flush()
			out.WriteString(`""` + "\n")
		} else if err := w.Write(rec); err != nil {
			panic(err)
		}
		rows++
	}
	w.Flush()
	return out.Bytes(), rows, nil
}

func classify(in []byte, bomBytes int, pe *csv.ParseError, got, want int) *refFault {
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return &refFault{kind: "fields", startLine: pe.StartLine, got: got, want: want}
	}
	f := &refFault{startLine: pe.StartLine, line: pe.Line, col: pe.Column}
	switch {
	case errors.Is(pe.Err, csv.ErrBareQuote):
		f.kind = "bare"
	case errors.Is(pe.Err, csv.ErrQuote):
		// The reader reports a stray quote where it is, and the end of the
		// input inside quotes past the end of the last line it read.
		f.kind = "eof"
		if lines := readerLines(in); pe.Line <= len(lines) {
			if l := lines[pe.Line-1]; pe.Column <= len(l) && l[pe.Column-1] == '"' {
				f.kind = "quote"
			}
		}
	default:
		panic(pe)
	}
	if f.line == 1 {
		f.col += bomBytes
	}
	return f
}

// readerLines splits in into lines as encoding/csv's reader sees them:
// "\r\n" read as "\n", a CR at the very end dropped.
func readerLines(in []byte) [][]byte {
	var lines [][]byte
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\n')
		var l []byte
		if i < 0 {
			l, in = bytes.TrimSuffix(in, []byte{'\r'}), nil
		} else {
			l, in = in[:i+1], in[i+1:]
			if bytes.HasSuffix(l, []byte("\r\n")) {
				l = append(l[:len(l)-2:len(l)-2], '\n')
			}
		}
		lines = append(lines, l)
	}
	return lines
}

var faultRe = regexp.MustCompile(`^invalid argument: line (\d+)(?:, column (\d+))?(?: \(in the record that starts on line (\d+)\))?: (.*)$`)

// parseFault reads a Normalize error message back into a refFault.
func parseFault(msg string) (*refFault, error) {
	m := faultRe.FindStringSubmatch(msg)
	if m == nil {
		return nil, fmt.Errorf("message %q has no line", msg)
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	f := &refFault{line: atoi(m[1]), col: atoi(m[2]), startLine: atoi(m[1])}
	if m[3] != "" {
		f.startLine = atoi(m[3])
	}
	what := m[4]
	switch {
	case strings.HasPrefix(what, "record has "):
		f.kind = "fields"
		f.line, f.col = 0, 0
		if _, err := fmt.Sscanf(what, "record has %d fields; the header has %d", &f.got, &f.want); err != nil {
			return nil, fmt.Errorf("message %q: %v", msg, err)
		}
	case strings.HasPrefix(what, `a " in an unquoted field`):
		f.kind = "bare"
	case strings.HasPrefix(what, `a " inside a quoted field is not doubled`):
		f.kind = "quote"
	case strings.HasPrefix(what, "a quoted field starts here and is not closed"):
		f.kind = "eof"
		f.line, f.col = 0, 0 // the reader reports the end of the input
	default:
		return nil, fmt.Errorf("message %q says an unknown fault", msg)
	}
	return f, nil
}

// readers wrap an input in ways that split its reads differently.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data and EOF", iotest.DataErrReader},
}

// checkNormalize runs Normalize on in, through a window of bufSize bytes
// read by the reader at readers[how], and fails t unless it agrees with the
// reference. It also checks that the output is a fixed point.
func checkNormalize(t *testing.T, in []byte, bufSize, how int) {
	t.Helper()
	want, wantRows, wantFault := reference(in)
	var out bytes.Buffer
	z := newNormalizer(&out, readers[how].wrap(bytes.NewReader(in)), bufSize, maxRecordBytes)
	err := z.all()
	where := fmt.Sprintf("Normalize(%q) with a %d-byte window, read %s", in, bufSize, readers[how].name)
	if wantFault == nil && wantRows == 0 {
		if err == nil || err.Error() != "invalid argument: the table is empty" {
			t.Fatalf("%s: got error %v, want the table is empty", where, err)
		}
		return
	}
	if wantFault != nil {
		if err == nil {
			t.Fatalf("%s: got %q, want an error like %+v", where, out.Bytes(), *wantFault)
		}
		got, perr := parseFault(err.Error())
		if perr != nil {
			t.Fatalf("%s: %v", where, perr)
		}
		if wantFault.kind == "eof" {
			wantFault.line, wantFault.col = 0, 0
		}
		if *got != *wantFault {
			t.Fatalf("%s:\n got error %v (%+v)\nwant fault %+v", where, err, *got, *wantFault)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: got error %v, want %q", where, err, want)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("%s:\n got %q\nwant %q", where, out.Bytes(), want)
	}
	st := z.stats
	if st.Rows != wantRows || st.Bytes != int64(len(want)) {
		t.Fatalf("%s: got %d rows, %d bytes; want %d rows, %d bytes", where, st.Rows, st.Bytes, wantRows, len(want))
	}
	if header := firstRecordBytes(want); st.HeaderBytes != header {
		t.Fatalf("%s: got HeaderBytes %d, want %d", where, st.HeaderBytes, header)
	}
	// The output is canonical: normalizing it again changes nothing.
	var again bytes.Buffer
	if st2, err := Normalize(&again, bytes.NewReader(want)); err != nil || !bytes.Equal(again.Bytes(), want) || st2 != st {
		t.Fatalf("%s: normalizing the output %q again gave %q, %+v, %v; want it unchanged, %+v", where, want, again.Bytes(), st2, err, st)
	}
}

// firstRecordBytes returns the length of the first record of canonical CSV.
func firstRecordBytes(b []byte) int {
	in := false
	for i, c := range b {
		switch {
		case c == '"':
			in = !in
		case c == '\n' && !in:
			return i + 1
		}
	}
	return len(b)
}
