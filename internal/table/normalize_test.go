package table

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestNormalizeAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     string
		wantRows int64
	}{
		{"canonical", "id,score\na,1\nb,2\n", "id,score\na,1\nb,2\n", 3},
		{"header only", "id,score\n", "id,score\n", 1},
		{"no final newline", "id,score\na,1", "id,score\na,1\n", 2},
		{"CRLF", "id,score\r\na,1\r\nb,2\r\n", "id,score\na,1\nb,2\n", 3},
		{"CR at the very end", "id\r\na\r", "id\na\n", 2},
		{"blank lines", "\n\r\nid\n\n\r\na\n\n", "id\na\n", 2},
		{"BOM", "\ufeffid,x\n1,2\n", "id,x\n1,2\n", 2},
		{"BOMs, one quoted", "\ufeff\ufeff\"\ufeffid\",x\n1,2\n", "id,x\n1,2\n", 2},
		{"BOM after a blank line", "\n\ufeffid\n1\n", "id\n1\n", 2},
		{"BOM in data", "id\n\ufeffa\n", "id\n\ufeffa\n", 2},
		{"needless quotes go", "\"id\",\"x\"\n\"a\",\"\"\n", "id,x\na,\n", 2},
		{"needed quotes stay", "n\n\"a,b\"\n\"say \"\"hi\"\"\"\n\"two\nlines\"\n", "n\n\"a,b\"\n\"say \"\"hi\"\"\"\n\"two\nlines\"\n", 4},
		{"CRLF inside quotes", "n\n\"a\r\nb\"\n\"c\r\r\nd\"\n", "n\n\"a\nb\"\n\"c\nd\"\n", 3},
		{"lone CR is data", "a,b\nx\ry,z\r\r\n", "a,b\n\"x\ry\",\"z\r\"\n", 2},
		{"leading spaces are quoted", "a,b,c\n x,\ty,\u00a0z\n", "a,b,c\n\" x\",\"\ty\",\"\u00a0z\"\n", 2},
		{"trailing space is not", "a\nx \n", "a\nx \n", 2},
		{"end-of-data marker", "a,b\n\\.,\"\\.\"\n\\x,\\\n", "a,b\n\"\\.\",\"\\.\"\n\\x,\\\n", 3},
		{"empty fields", "a,b,c\n,,\n\"\",,\"\"\n", "a,b,c\n,,\n,,\n", 3},
		{"one empty field is quoted", "a\n\"\"\nb\n\"\"", "a\n\"\"\nb\n\"\"\n", 4},
		{"empty first name", ",b\n1,2\n", ",b\n1,2\n", 2},
		{"only a quoted BOM", "\"\ufeff\"\nx\n", "\"\"\nx\n", 2},
		{"invalid UTF-8 is data", "a\n\xff\xfe\n", "a\n\xff\xfe\n", 2},
		{"truncated rune first", "a,b\n\xe3\x80,1\n", "a,b\n\xe3\x80,1\n", 2},
		{"closing quote at the end", "a\n\"x\"", "a\nx\n", 2},
		{"closing quote before CR at the end", "a\n\"x\"\r", "a\nx\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			st, err := Normalize(&out, strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("Normalize(%q): got error %v, want %q", tt.in, err, tt.want)
			}
			if out.String() != tt.want {
				t.Errorf("Normalize(%q):\n got %q\nwant %q", tt.in, out.String(), tt.want)
			}
			if st.Rows != tt.wantRows || st.Bytes != int64(len(tt.want)) {
				t.Errorf("Normalize(%q): got %d rows, %d bytes; want %d rows, %d bytes", tt.in, st.Rows, st.Bytes, tt.wantRows, len(tt.want))
			}
			// Every case agrees with encoding/csv, but for the documented
			// differences, whatever the reads.
			for how := range readers {
				checkNormalize(t, []byte(tt.in), 3, how)
			}
		})
	}
}

func TestNormalizeStats(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	st, err := Normalize(&out, strings.NewReader("\ufeff\"id\",\"a,b\"\r\n1,2\r\n3,4"))
	if err != nil {
		t.Fatal(err)
	}
	want := NormalizeStats{Rows: 3, Columns: 2, Bytes: int64(out.Len()), HeaderBytes: len("id,\"a,b\"\n")}
	if st != want {
		t.Errorf("Normalize stats: got %+v, want %+v", st, want)
	}
}

func TestNormalizeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string // want: the message after "invalid argument: "
	}{
		{"empty", "", "the table is empty"},
		{"only blank lines", "\n\r\n\r", "the table is empty"},
		{"only a BOM", "\ufeff\ufeff", "the table is empty"},
		{"too many fields", "a,b\n1,2\n1,2,3\n", "line 3: record has 3 fields; the header has 2"},
		{"too few fields", "a,b\n1,2\n\n3\n", "line 4: record has 1 fields; the header has 2"},
		{
			"field count of a multi-line record",
			"a,b\n\"x\ny\",1,2\n", "line 2: record has 3 fields; the header has 2",
		},
		{"bare quote", "a,b\nx\"y,1\n", `line 2, column 2: a " in an unquoted field (quote the field and double the inner quotes)`},
		{"bare quote after a BOM", "\ufeffa\"b\n", `line 1, column 5: a " in an unquoted field (quote the field and double the inner quotes)`},
		{
			"bare quote after a multi-line field",
			"a,b\n\"x\ny\",z\"\n", `line 3, column 5 (in the record that starts on line 2): a " in an unquoted field (quote the field and double the inner quotes)`,
		},
		{"text after a closing quote", "a,b\n\"x\"y,1\n", `line 2, column 3: a " inside a quoted field is not doubled, or text follows the closing quote`},
		{"CR CR LF after a closing quote", "a\n\"x\"\r\r\n", `line 2, column 3: a " inside a quoted field is not doubled, or text follows the closing quote`},
		{
			"quote not doubled",
			"a\n\"say \"hi\"\"\n", `line 2, column 6: a " inside a quoted field is not doubled, or text follows the closing quote`,
		},
		{"quote never closed", "a,b\n1,2\n\"x,1\n3,4\n", "line 3, column 1: a quoted field starts here and is not closed by the end of the file"},
		{
			"second field never closed",
			"a,b\n\"x\ny\",\"z\n", "line 3, column 4 (in the record that starts on line 2): a quoted field starts here and is not closed by the end of the file",
		},
		{"escaped quote at the end", "\"a\"\"", "line 1, column 1: a quoted field starts here and is not closed by the end of the file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Normalize(io.Discard, strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Normalize(%q): got no error, want %q", tt.in, tt.want)
			}
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Errorf("Normalize(%q): error %v does not wrap domain.ErrInvalidArgument", tt.in, err)
			}
			if got := strings.TrimPrefix(err.Error(), "invalid argument: "); got != tt.want {
				t.Errorf("Normalize(%q):\n got %s\nwant %s", tt.in, got, tt.want)
			}
			for how := range readers {
				checkNormalize(t, []byte(tt.in), 2, how)
			}
		})
	}
}

func TestNormalizeLongRecord(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	tests := []struct {
		name, in, want string
	}{
		{"fits", "a\n" + long + "\n", ""},
		{"too long", "a\n" + long + "x\n", "invalid argument: line 2: the record that starts here is longer than 101 bytes; is a quoted field not closed?"},
		{"unclosed quote", "a\nb\n\"" + long + "\n", "invalid argument: line 3: the record that starts here is longer than 101 bytes; is a quoted field not closed?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The record and its '\n' fill the window, which grows from 8
			// bytes up to the limit.
			z := newNormalizer(io.Discard, strings.NewReader(tt.in), 8, 101)
			err := z.all()
			if got := errString(err); got != tt.want {
				t.Errorf("Normalize of a %d-byte record, limit 101: got error %q, want %q", len(tt.in), got, tt.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestNormalizeIOErrors(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk full")
	errNet := errors.New("connection reset")
	in := "a,b\n" + strings.Repeat("1,2\n", 100_000)

	_, err := Normalize(failWriter{errDisk}, strings.NewReader(in))
	if !errors.Is(err, errDisk) || errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("Normalize to a failing writer: got error %v, want one that wraps %v", err, errDisk)
	}
	_, err = Normalize(io.Discard, io.MultiReader(strings.NewReader(in), iotest.ErrReader(errNet)))
	if !errors.Is(err, errNet) {
		t.Errorf("Normalize from a failing reader: got error %v, want one that wraps %v", err, errNet)
	}
	_, err = Normalize(io.Discard, stuckReader{})
	if !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("Normalize from a reader that returns nothing: got error %v, want one that wraps io.ErrNoProgress", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

// TestNormalizeLarge pushes a table of many windows through Normalize, in
// reads of every size, and checks it against the reference.
func TestNormalizeLarge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var in bytes.Buffer
	in.WriteString("\ufeffid,name,note,score\r\n")
	for i := 0; in.Len() < 3<<20; i++ {
		switch i % 7 {
		case 0:
			in.WriteString("\"CHEMBL1\",\"a, b\",\"say \"\"hi\"\"\",0.5\r\n")
		case 1:
			in.WriteString("CHEMBL2,\"multi\r\nline\",\\.,1\n\n")
		default:
			in.WriteString("CHEMBL3,aspirin," + string(appendField(nil, []byte(genContent(r)), false)) + ",0.25\n")
		}
	}
	want, wantRows, fault := reference(in.Bytes())
	if fault != nil {
		t.Fatalf("the reference rejects the input: %+v", *fault)
	}
	for _, bufSize := range []int{normalizeBufSize, 4096, 100} {
		var out bytes.Buffer
		z := newNormalizer(&out, iotest.HalfReader(bytes.NewReader(in.Bytes())), bufSize, maxRecordBytes)
		if err := z.all(); err != nil {
			t.Fatalf("Normalize with a %d-byte window: %v", bufSize, err)
		}
		if !bytes.Equal(out.Bytes(), want) || z.stats.Rows != wantRows {
			t.Errorf("Normalize with a %d-byte window: got %d rows, %d bytes; want %d rows, %d bytes, the same as encoding/csv",
				bufSize, z.stats.Rows, out.Len(), wantRows, len(want))
		}
	}
}
