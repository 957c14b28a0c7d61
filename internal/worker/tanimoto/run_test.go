package tanimoto

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/scimesh/scimesh/internal/testenv"
)

func run(t testing.TB, p json.RawMessage, hasHeader bool, input string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), p, hasHeader, strings.NewReader(input), &out)
	return out.String(), err
}

func TestRun(t *testing.T) {
	t.Parallel()
	fp := strings.Repeat("f", 512)
	half := strings.Repeat("0f", 256)
	tests := []struct {
		name      string
		query     string
		hasHeader bool
		input     string
		want      string
	}{
		{"header", "ff", true, "id,fingerprint\na,ff\nb,0f\nc,00\n", "id,score\na,1\nb,0.5\nc,0\n"},
		{"no header", "ff", false, "a,ff\nb,0F\n", "id,score\na,1\nb,0.5\n"},
		{"2048 bits", fp, true, "id,fingerprint\nm1," + fp + "\nm2," + half + "\n", "id,score\nm1,1\nm2,0.5\n"},
		{"both empty", "0000", true, "id,fingerprint\nz,0000\n", "id,score\nz,0\n"},
		{"disjoint", "aa", false, "d,55\n", "id,score\nd,0\n"},
		{"a third", "03", false, "t,06\n", "id,score\nt,0.3333333333333333\n"},
		{"columns found by name", "ff", true, "smiles,fingerprint,note,id\nCCO,0f,x,e1\n", "id,score\ne1,0.5\n"},
		{"extra columns without header", "ff", false, "a,ff,extra,more\n", "id,score\na,1\n"},
		{"quoted id with comma", "ff", true, "id,fingerprint\n\"a,b\",ff\n", "id,score\n\"a,b\",1\n"},
		{"quoted id with quotes", "ff", true, "id,fingerprint\n\"say \"\"hi\"\"\",0f\n", "id,score\n\"say \"\"hi\"\"\",0.5\n"},
		{"quoted id over lines", "ff", true, "id,fingerprint\n\"two\nlines\",ff\nnext,00\n", "id,score\n\"two\nlines\",1\nnext,0\n"},
		{"needless quotes dropped", "ff", true, "\"id\",\"fingerprint\"\n\"plain\",\"ff\"\n", "id,score\nplain,1\n"},
		{"id with leading space quoted", "ff", false, " a,ff\n", "id,score\n\" a\",1\n"},
		{"id backslash dot quoted", "ff", false, "\\.,ff\n", "id,score\n\"\\.\",1\n"},
		{"empty id", "ff", false, ",ff\n", "id,score\n,1\n"},
		{"CRLF and BOM", "ff", true, "\ufeffid,fingerprint\r\na,ff\r\nb,0f\r\n", "id,score\na,1\nb,0.5\n"},
		{"blank lines skipped", "ff", true, "\nid,fingerprint\n\na,ff\n\n", "id,score\na,1\n"},
		{"no final line end", "ff", true, "id,fingerprint\na,ff", "id,score\na,1\n"},
		{"empty input", "ff", true, "", "id,score\n"},
		{"header only", "ff", true, "id,fingerprint\n", "id,score\n"},
		{"mixed case query", "aBcD", false, "x,ABcd\n", "id,score\nx,1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := run(t, params(tc.query), tc.hasHeader, tc.input)
			if err != nil {
				t.Fatalf("Run(%q): %v", tc.input, err)
			}
			if got != tc.want {
				t.Errorf("Run(%q)\n got %q\nwant %q", tc.input, got, tc.want)
			}
			ref, _, bad := referenceRun(t, tc.query, tc.hasHeader, []byte(tc.input))
			if bad || string(ref) != tc.want {
				t.Errorf("reference(%q) = %q, bad %v; the test case is wrong", tc.input, ref, bad)
			}
		})
	}
}

func TestRunBadInput(t *testing.T) {
	t.Parallel()
	fp := strings.Repeat("ab", 256)
	tests := []struct {
		name      string
		params    string
		hasHeader bool
		input     string
		want      string // a substring of the error
	}{
		{"bad hex", `{"query":"ff"}`, true, "id,fingerprint\na,ff\nb,fg\n", "line 3: fingerprint is not hex: byte 2 is 'g'"},
		{"bad hex in 2048", `{"query":"` + fp + `"}`, true, "id,fingerprint\na," + fp[:300] + "x" + fp[301:] + "\n", "line 2: fingerprint is not hex: byte 301 is 'x'"},
		{"too short", `{"query":"` + fp + `"}`, true, "id,fingerprint\na," + fp[:510] + "\n", "line 2: fingerprint is 510 hex digits long; the query is 512"},
		{"too long", `{"query":"ff"}`, false, "a,ff\nb,fff\n", "line 2: fingerprint is 3 hex digits long; the query is 2"},
		{"empty fingerprint", `{"query":"ff"}`, false, "a,\n", "line 1: fingerprint is 0 hex digits long"},
		{"space in fingerprint", `{"query":"ff"}`, false, "a, f\n", "line 1: fingerprint is not hex: byte 1 is ' '"},
		{"missing column", `{"query":"ff"}`, true, "id,fingerprint\na,ff\nb\n", "line 3: the record has 1 field; the fingerprint is column 2"},
		{"missing column by header", `{"query":"ff"}`, true, "fingerprint,x,id\nff,1,a\nff,1\n", "line 3: the record has 2 fields; the id is column 3"},
		{"header without fingerprint", `{"query":"ff"}`, true, "id,fp\na,ff\n", "line 1: the header has no column \"fingerprint\""},
		{"header without id", `{"query":"ff"}`, true, "\n\nname,fingerprint\n", "line 3: the header has no column \"id\""},
		{"header with id twice", `{"query":"ff"}`, true, "id,fingerprint,id\n", "line 1: the header names the column \"id\" twice"},
		{"bare quote", `{"query":"ff"}`, true, "id,fingerprint\na\"b,ff\n", "line 2: malformed CSV: bare \" in non-quoted-field"},
		{"text after quote", `{"query":"ff"}`, true, "id,fingerprint\n\"a\"b,ff\n", "line 2: malformed CSV: extraneous or missing \" in quoted-field"},
		{"unterminated quote", `{"query":"ff"}`, true, "id,fingerprint\na,ff\n\"b,ff\nc,ff\n", "line 3: malformed CSV: extraneous"},
		{"line after multi-line id", `{"query":"ff"}`, true, "id,fingerprint\n\n\"x\ny\",ff\r\nbad,zz\n", "line 5: fingerprint is not hex"},
		{"no parameters", ``, true, "", "parameters must be a JSON object"},
		{"parameters not an object", `[1]`, true, "", "parameters must be a JSON object"},
		{"parameters not JSON", `{"query":`, true, "", "parameters are not valid JSON"},
		{"no query", `{"q":"ff"}`, true, "", `parameter "query" is missing`},
		{"null query", `{"query":null}`, true, "", `parameter "query" is missing`},
		{"query not a string", `{"query":255}`, true, "", `parameter "query" must be a string`},
		{"empty query", `{"query":""}`, true, "", `parameter "query" is empty`},
		{"odd query", `{"query":"fff"}`, true, "", "3 hex digits are not a whole number of bytes"},
		{"non-hex query", `{"query":"0x"}`, true, "", "byte 2 is 'x', not a hex digit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := run(t, json.RawMessage(tc.params), tc.hasHeader, tc.input)
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("Run(%s, %q) error = %v, want ErrBadInput", tc.params, tc.input, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run(%s, %q) error = %q, want it to contain %q", tc.params, tc.input, err, tc.want)
			}
		})
	}
}

// TestRunLongRecord checks the bound on a record: one of MaxRecordBytes,
// its line end included, is read; one byte more fails as bad input naming
// the line it starts on, whether one line is too long or a quoted field
// spans too many; and a line that does not end is refused once the bound
// and a buffer or two of it were read, not at its end.
func TestRunLongRecord(t *testing.T) {
	t.Parallel()
	head := "id,fingerprint,note\na,ff,x\n"
	note := strings.Repeat("n", MaxRecordBytes-len("b,ff,\n"))
	if got, err := run(t, params("ff"), true, head+"b,ff,"+note+"\n"); err != nil || got != "id,score\na,1\nb,1\n" {
		t.Errorf("a record of %d bytes: %q, %v; want it read", MaxRecordBytes, got, err)
	}
	const want = "the record that starts here is longer than 1 MiB"
	for name, input := range map[string]string{
		"one line":     head + "b,ff," + note + "n\n",
		"quoted lines": head + "b,ff,\"" + strings.Repeat(strings.Repeat("q", 999)+"\n", MaxRecordBytes/1000+2) + "\"\n",
	} {
		_, err := run(t, params("ff"), true, input)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "line 3: "+want) {
			t.Errorf("%s: error %v, want bad input, line 3: %s", name, err, want)
		}
	}

	endless := &testenv.CountingReader{R: io.MultiReader(strings.NewReader(head), io.LimitReader(testenv.Endless('x'), 64*MaxRecordBytes))}
	err := Run(context.Background(), params("ff"), true, endless, io.Discard)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "line 3: "+want) {
		t.Errorf("a line of 64 MiB: error %v, want bad input, line 3: %s", err, want)
	}
	if limit := int64(MaxRecordBytes + 2*readBufferSize); endless.N > limit {
		t.Errorf("Run read %d bytes of a line that does not end; want at most %d", endless.N, limit)
	}
}

func TestRunOtherErrors(t *testing.T) {
	t.Parallel()
	readErr := errors.New("connection reset")
	err := Run(context.Background(), params("ff"), false, iotest.ErrReader(readErr), &bytes.Buffer{})
	if !errors.Is(err, readErr) || errors.Is(err, ErrBadInput) {
		t.Errorf("Run over a failing reader: error = %v, want %v and not ErrBadInput", err, readErr)
	}
	writeErr := errors.New("disk full")
	err = Run(context.Background(), params("ff"), false, strings.NewReader("a,ff\n"), failingWriter{writeErr})
	if !errors.Is(err, writeErr) || errors.Is(err, ErrBadInput) {
		t.Errorf("Run into a failing writer: error = %v, want %v and not ErrBadInput", err, writeErr)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestScanStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	q, err := NewQuery("ff")
	if err != nil {
		t.Fatal(err)
	}
	input := strings.Repeat("a,ff\n", 10*ctxEvery)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Scan(ctx, false, strings.NewReader(input), func([]byte, float64) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with a cancelled context: error = %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	rows := 0
	err = q.Scan(ctx, false, strings.NewReader(input), func([]byte, float64) error {
		rows++
		if rows == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBadInput) {
		t.Errorf("Scan cancelled midway: error = %v, want context.Canceled", err)
	}
	if rows > ctxEvery {
		t.Errorf("Scan scored %d rows after the cancel; it looks every %d", rows, ctxEvery)
	}
}

func TestScanStopsOnCallbackError(t *testing.T) {
	t.Parallel()
	q, err := NewQuery("ff")
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	rows := 0
	err = q.Scan(context.Background(), false, strings.NewReader("a,ff\nb,ff\nc,ff\n"), func([]byte, float64) error {
		rows++
		return stop
	})
	if err != stop || rows != 1 {
		t.Errorf("Scan = %v after %d rows, want %v after 1", err, rows, stop)
	}
}

// TestRunMatchesReference compares Run with referenceRun over random chunks
// of every shape: fingerprint lengths, densities, header or not, quoted and
// odd ids, long lines that overflow the read buffer.
func TestRunMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	ids := []string{"CHEMBL25", "a,b", `say "hi"`, "two\nlines", " lead", `\.`, "", "é", "\u00a0nbsp", "cr\rin"}
	for iter := range 200 {
		digits := []int{2, 42, 256, 512, 2048}[iter%5]
		rows := 1 + rng.IntN(50)
		densities := []float64{0, 0.02, 0.3, 0.7, 1}
		if iter < 4 {
			// Lines longer than the read buffer.
			digits, rows, densities = readBufferSize+2, 2, []float64{0.5}
		}
		query := randomHex(rng, digits, 0.5)
		hasHeader := iter%2 == 0
		var in bytes.Buffer
		w := csv.NewWriter(&in)
		w.UseCRLF = iter%5 == 0
		if hasHeader {
			_ = w.Write([]string{"extra", "fingerprint", "id"})
		}
		for r := range rows {
			id := ids[rng.IntN(len(ids))] + strconv.Itoa(r)
			fp := randomHex(rng, digits, densities[rng.IntN(len(densities))])
			if hasHeader {
				_ = w.Write([]string{"x", fp, id})
			} else {
				_ = w.Write([]string{id, fp, "x"})
			}
		}
		w.Flush()
		want, _, bad := referenceRun(t, query, hasHeader, in.Bytes())
		if bad {
			t.Fatalf("reference refuses the generated input %q", in.Bytes())
		}
		got, err := run(t, params(query), hasHeader, in.String())
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got != string(want) {
			t.Fatalf("Run(%q)\n got %q\nwant %q", in.Bytes(), got, want)
		}
	}
}

func TestAppendRowMatchesCSVWriter(t *testing.T) {
	t.Parallel()
	ids := []string{"", "a", "a,b", `"`, "x\ry", "x\ny", " a", "\ta", "\u00a0a", "\u2003a", `\.`, `\.x`, "a ", "é", "\xff", "\x85"}
	scores := []float64{0, 1, 0.5, 1.0 / 3, 2.0 / 3, 1.0 / 2048, 1.0 / 65536, 0.1, 5e-324, 0.00012345678901234567, 1.2345678901234567e-300}
	cache := new(scoreCache) // each score is formatted, then remembered
	for _, id := range ids {
		for _, score := range scores {
			var want bytes.Buffer
			w := csv.NewWriter(&want)
			_ = w.Write([]string{id, strconv.FormatFloat(score, 'g', -1, 64)})
			w.Flush()
			if got := cache.appendRow(nil, []byte(id), score); string(got) != want.String() {
				t.Errorf("appendRow(%q, %v) = %q, want %q", id, score, got, want.String())
			}
		}
	}
}

// TestScoreTextRoundTrips checks the claim of the package comment: 'g' with
// precision -1 is the shortest text that reads back as the same float64.
func TestScoreTextRoundTrips(t *testing.T) {
	t.Parallel()
	cache := new(scoreCache)
	for or := 1; or <= 4096; or++ {
		for _, and := range []int{0, 1, or / 3, or / 2, or - 1, or} {
			s := float64(and) / float64(or)
			text := strconv.FormatFloat(s, 'g', -1, 64)
			back, err := strconv.ParseFloat(text, 64)
			if err != nil || back != s {
				t.Fatalf("%d/%d: %q reads back as %v, %v", and, or, text, back, err)
			}
			// The cache, which sees thousands of scores collide, agrees.
			if got := cache.appendScore(nil, s); string(got) != text {
				t.Fatalf("%d/%d: the cache says %q, want %q", and, or, got, text)
			}
			// One digit fewer, rounded either way, is a different float64.
			if mant := strings.TrimLeft(strings.Split(text, "e")[0], "0."); len(mant) > 1 {
				shorter := strconv.FormatFloat(s, 'g', len(mant)-1, 64)
				if b, _ := strconv.ParseFloat(shorter, 64); b == s {
					t.Fatalf("%d/%d: %q is shorter than %q and reads back the same", and, or, shorter, text)
				}
			}
		}
	}
}

var lineRe = regexp.MustCompile(`: line (\d+): `)

// errLine returns the line an error names, or 0.
func errLine(err error) int {
	m := lineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func ExampleRun() {
	in := strings.NewReader("id,fingerprint\naspirin,ff00\n\"caffeine, anhydrous\",0f00\nwater,0000\n")
	var out bytes.Buffer
	err := Run(context.Background(), json.RawMessage(`{"query":"FF00"}`), true, in, &out)
	fmt.Print(out.String(), err, "\n")

	err = Run(context.Background(), json.RawMessage(`{"query":"ff00"}`), true, strings.NewReader("id,fingerprint\na,ff0\n"), &out)
	fmt.Println(err, errors.Is(err, ErrBadInput))
	// Output:
	// id,score
	// aspirin,1
	// "caffeine, anhydrous",0.5
	// water,0
	// <nil>
	// tanimoto: bad input: line 2: fingerprint is 3 hex digits long; the query is 4 true
}
