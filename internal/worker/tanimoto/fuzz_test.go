package tanimoto

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func FuzzRun(f *testing.F) {
	fp := strings.Repeat("a5", 32)
	seeds := []struct {
		input     string
		hasHeader bool
		query     string
	}{
		{"id,fingerprint\na,ff\nb,0f\n", true, "ff"},
		{"a,ff\nb,0F\n", false, "FF"},
		{"id,fingerprint\nm1," + fp + "\nm2," + strings.ToUpper(fp) + "\n", true, fp},
		{"fingerprint,x,id\nff,1,a\n", true, "0f"},
		{"id,fingerprint\n\"a,b\",ff\n\"say \"\"hi\"\"\",00\n\"two\nlines\",0f\n", true, "ff"},
		{"\ufeffid,fingerprint\r\na,ff\r\n\r\nb,\"0f\"\r\n", true, "ff"},
		{"id,fingerprint\na\"b,ff\n", true, "ff"},
		{"id,fingerprint\n\"a\"b,ff\n", true, "ff"},
		{"id,fingerprint\n\"a,ff\nb,ff\n", true, "ff"},
		{"a,fg\n", false, "ff"},
		{"a,fff\n", false, "ff"},
		{"a\n", false, "ff"},
		{" a,ff\n\\.,00\n,ff\n", false, "ff"},
		{"id,fingerprint,id\n", true, "ff"},
		{"", true, "ff"},
		{"a,ff\n", false, "f"},
		{"a,ff\n", false, ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.input), s.hasHeader, s.query)
	}
	f.Fuzz(func(t *testing.T, input []byte, hasHeader bool, query string) {
		var out bytes.Buffer
		err := Run(context.Background(), params(query), hasHeader, bytes.NewReader(input), &out)
		want, wantLine, bad := referenceRun(t, query, hasHeader, input)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("Run(%q, %q): error %v is not ErrBadInput", input, query, err)
			}
			if !bad {
				t.Fatalf("Run(%q, %q) = %v; encoding/csv and the reference accept it", input, query, err)
			}
			if got := errLine(err); got != wantLine {
				t.Fatalf("Run(%q, %q) = %v; want line %d", input, query, err, wantLine)
			}
			return
		}
		if bad {
			t.Fatalf("Run(%q, %q) accepts input the reference refuses at line %d", input, query, wantLine)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("Run(%q, %q)\n got %q\nwant %q", input, query, out.Bytes(), want)
		}
		// The output is CSV "id,score" with one row per input row.
		recs, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			t.Fatalf("output %q does not parse: %v", want, err)
		}
		if len(recs) == 0 || len(recs[0]) != 2 || recs[0][0] != "id" || recs[0][1] != "score" {
			t.Fatalf("output %q does not start with the header id,score", want)
		}
		if got, want := len(recs)-1, dataRecords(t, input, hasHeader); got != want {
			t.Fatalf("Run(%q) wrote %d rows for %d input rows", input, got, want)
		}
	})
}

// dataRecords counts the data records of a CSV input as encoding/csv reads
// it.
func dataRecords(t *testing.T, input []byte, hasHeader bool) int {
	r := csv.NewReader(bytes.NewReader(input))
	r.FieldsPerRecord = -1
	n := 0
	for {
		_, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("encoding/csv refuses input that Run accepted: %v", err)
		}
		n++
	}
	if hasHeader && n > 0 {
		n--
	}
	return n
}

func FuzzDecodeHex(f *testing.F) {
	for _, s := range []string{"", "00", "ff", "0123456789abcdefABCDEF", strings.Repeat("f", 42), "0g", "\x80\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, err := DecodeHex(nil, src)
		b, herr := hex.DecodeString(string(src))
		if (err == nil) != (herr == nil) {
			t.Fatalf("DecodeHex(%q) error = %v; encoding/hex says %v", src, err, herr)
		}
		if err != nil {
			return
		}
		want := wantWords(t, string(src))
		if len(got) != len(want) || len(b) != len(src)/2 {
			t.Fatalf("DecodeHex(%q) = %d words, want %d", src, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("DecodeHex(%q) word %d = %#x, want %#x", src, i, got[i], want[i])
			}
		}
	})
}
