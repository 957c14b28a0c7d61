package table

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/testenv"
)

// selectCSV runs in through a TopK and returns what a worker sends.
func selectCSV(t testing.TB, in io.Reader, order domain.Order, k int) (*Selection, string, error) {
	t.Helper()
	tk, err := NewTopK("score", order, k)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := tk.Select(in)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	if err := sel.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	return sel, buf.String(), nil
}

// TestTopKMatchesSort checks the bounded heap against sorting all rows,
// over outputs full of ties, in both orders and for k below, at and above
// the row count.
func TestTopKMatchesSort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		n := rng.IntN(60)
		k := 1 + rng.IntN(70)
		order := []domain.Order{domain.Desc, domain.Asc}[round%2]
		type row struct {
			score float64
			seq   int
		}
		var rows []row
		var in strings.Builder
		in.WriteString("name,score\n")
		for i := range n {
			s := float64(rng.IntN(8)) / 2
			if rng.IntN(10) == 0 {
				s = -s // -0 ties with 0
			}
			rows = append(rows, row{s, i})
			fmt.Fprintf(&in, "r%d,%s\n", i, strconv.FormatFloat(s, 'g', -1, 64))
		}
		sel, got, err := selectCSV(t, strings.NewReader(in.String()), order, k)
		if err != nil {
			t.Fatalf("Select: %v", err)
		}
		if sel.RowsRead != n {
			t.Fatalf("round %d: RowsRead %d, want %d", round, sel.RowsRead, n)
		}
		slices.SortStableFunc(rows, func(a, b row) int {
			if order == domain.Desc {
				return cmp.Compare(b.score, a.score)
			}
			return cmp.Compare(a.score, b.score)
		})
		var want bytes.Buffer
		w := csv.NewWriter(&want)
		_ = w.Write([]string{"name", "score"})
		for _, r := range rows[:min(k, n)] {
			_ = w.Write([]string{"r" + strconv.Itoa(r.seq), strconv.FormatFloat(r.score, 'g', -1, 64)})
		}
		w.Flush()
		if got != want.String() {
			t.Fatalf("round %d (n %d, k %d, %s):\n got %q\nwant %q", round, n, k, order, got, want.String())
		}
	}
}

// TestTopKOutputRules checks what a worker sends for outputs that bend the
// rules, and that the coordinator accepts it; and how it words outputs
// that break them (TestTopKRejects has the rest).
func TestTopKOutputRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
		rowsRead       int
		err            string // the whole message after "invalid argument: "
	}{
		{"bom and quoting", "\ufeff\"id\",\"score\"\r\n\"a,b\",1\r\n\"x\r\r\ny\",2\r\n", "id,score\n\"x\ny\",2\n\"a,b\",1\n", 2, ""},
		{"header only", "id,score\n", "id,score\n", 0, ""},
		{"exponent and sign", "id,score\na,-1e-3\nb,+2\nc,0x1p-2\n", "id,score\nb,+2\nc,0x1p-2\n", 3, ""},
		{"repeated marks and a quoted mark", "\ufeff\ufeff\"\ufeffid\",score\na,1\n", "id,score\na,1\n", 1, ""},
		{"more rows than k", "id,score\na,1\nb,3\nc,2\nd,3\n", "id,score\nb,3\nd,3\n", 4, ""},
		{"empty", "", "", 0, `output is empty; it needs a header line naming the column "score"`},
		{"no score column", "id,value\na,1\n", "", 0, `output header has no column "score"; its columns are "id", "value"`},
		{"score twice", "score,score\n1,2\n", "", 0, `output header names the score column "score" 2 times (columns 1, 2); it must appear once`},
		{"infinite", "id,score\na,1\nb,+Inf\n", "", 0, `output line 3: score "+Inf" in column "score" is not a finite number`},
		{"spaces", "id,score\na, 1\n", "", 0, `output line 2: score " 1" in column "score" is not a number`},
		{"empty score", "id,score\na,\n", "", 0, `output line 2: score in column "score" is empty; every row needs a finite number`},
		{"short record", "id,score\na\n", "", 0, `output line 2: record has 1 fields; the header has 2`},
		{"bare quote", "id,score\na\"b,1\n", "", 0, `output line 2, column 2: a " in an unquoted field (quote the field and double the inner quotes)`},
		{"open quote", "id,score\n\"a,1\n", "", 0, `output line 2, column 6: a quoted field is not closed, or a " inside it is not doubled`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sel, got, err := selectCSV(t, strings.NewReader(c.in), domain.Desc, 2)
			if c.err != "" {
				if err == nil || !errors.Is(err, domain.ErrInvalidArgument) || strings.TrimPrefix(err.Error(), "invalid argument: ") != c.err {
					t.Fatalf("Select(%q): error %v, want invalid argument: %s", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select(%q): %v", c.in, err)
			}
			if got != c.want || sel.RowsRead != c.rowsRead {
				t.Fatalf("Select(%q): kept %q of %d rows, want %q of %d", c.in, got, sel.RowsRead, c.want, c.rowsRead)
			}
			// The coordinator accepts what the worker keeps.
			if _, err := ParseOutput([]byte(got), "score", 2); err != nil {
				t.Fatalf("the coordinator would refuse %q: %v", got, err)
			}
		})
	}
}

// TestTopKRejects checks that Select refuses what ParseOutput refuses, with
// the same message, but for more rows than k: Select keeps the best of them.
func TestTopKRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range outputRejects {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			column := tt.column
			switch column {
			case "":
				column = "score"
			case "-":
				column = ""
			}
			tk, err := NewTopK(column, domain.Desc, 2)
			if err == nil {
				var sel *Selection
				sel, err = tk.Select(strings.NewReader(tt.in))
				if strings.HasPrefix(tt.wantMsg, "output has ") {
					if err != nil || len(sel.Rows) != 2 || sel.RowsRead != 3 {
						t.Fatalf("Select(%q): %+v, %v; want the best 2 of 3 rows", tt.in, sel, err)
					}
					return
				}
			}
			if err == nil {
				t.Fatalf("Select(%q): no error, want %s", tt.in, tt.wantMsg)
			}
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Errorf("Select(%q): got error %v, want one that wraps domain.ErrInvalidArgument", tt.in, err)
			}
			if msg := strings.TrimPrefix(err.Error(), "invalid argument: "); msg != tt.wantMsg {
				t.Errorf("Select(%q):\n got message %s\nwant message %s", tt.in, msg, tt.wantMsg)
			}
		})
	}
}

// TestTopKLongRecord checks the bound on one record: a record of the
// bound, its line end included, is read; one byte more is refused as too
// long, naming where it starts, whether it is the header, a row, a quoted
// field never closed or a line that never ends — and however the output
// arrives. The default bound is the upload's, 64 MiB.
func TestTopKLongRecord(t *testing.T) {
	t.Parallel()
	if tk, _ := NewTopK("score", domain.Desc, 1); tk.maxRecord != 64<<20 {
		t.Errorf("NewTopK's record bound is %d bytes, want 64 MiB", tk.maxRecord)
	}
	field := strings.Repeat("x", 97) // with ",1\n", a record of 100 bytes
	tests := []struct {
		name, in, want string
	}{
		{"fits", "id,score\n" + field + ",1\n", ""},
		{"too long", "id,score\na,1\n" + field + "x,1\n", "invalid argument: output: the record after line 2 is longer than 100 bytes; does a line never end, or is a quoted field not closed?"},
		{"quoted lines", "id,score\n\"a\nb\",1\n\"" + field + "\n" + field + "\",2\n", "invalid argument: output: the record after line 3 is longer than 100 bytes; does a line never end, or is a quoted field not closed?"},
		{"unclosed quote", "id,score\na,1\n\"" + strings.Repeat(field+"\n", 5), "invalid argument: output: the record after line 2 is longer than 100 bytes; does a line never end, or is a quoted field not closed?"},
		{"header", strings.Repeat("h", 98) + ",score\n", "invalid argument: output line 1: the header is longer than 100 bytes; is a quoted field not closed?"},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			var in io.Reader = strings.NewReader(tt.in)
			if oneByte {
				in = iotest.OneByteReader(in)
			}
			tk, _ := NewTopK("score", domain.Desc, 1)
			tk.maxRecord = 100
			_, err := tk.Select(in)
			if got := fmt.Sprint(err); (err == nil) != (tt.want == "") || err != nil && got != tt.want || err != nil && !errors.Is(err, domain.ErrInvalidArgument) {
				t.Errorf("%s (a byte at a time: %v): error %v, want %q", tt.name, oneByte, err, tt.want)
			}
		}
	}
}

// TestTopKEndlessRecord gives Select an output whose second row does not
// end for 16 MiB: it is refused once the bound (1 MiB here) and one buffer
// of it were read, and no more of it is read.
func TestTopKEndlessRecord(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	endless := &testenv.CountingReader{R: io.MultiReader(strings.NewReader("id,score\na,1\n"), io.LimitReader(testenv.Endless('x'), 16*bound))}
	tk, _ := NewTopK("score", domain.Desc, 1)
	tk.maxRecord = bound
	_, err := tk.Select(endless)
	if err == nil || !strings.Contains(err.Error(), "the record after line 2 is longer than 1 MiB") {
		t.Fatalf("Select of an endless record: %v, want refused as too long", err)
	}
	if endless.N > bound+topKBufSize+64 {
		t.Errorf("Select read %d bytes of the output; want at most the bound, %d, and a buffer of %d", endless.N, bound, topKBufSize)
	}
}

func TestNewTopKRejectsSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		column string
		order  domain.Order
		want   string
	}{
		{"", domain.Desc, "invalid argument: the score column name is empty; name the column that holds the scores"},
		{"score", "up", `invalid argument: order "up" must be "desc" or "asc"`},
		{"score", "", `invalid argument: order "" must be "desc" or "asc"`},
	} {
		if _, err := NewTopK(c.column, c.order, 1); err == nil || err.Error() != c.want || !errors.Is(err, domain.ErrInvalidArgument) {
			t.Errorf("NewTopK(%q, %q): error %v, want %s", c.column, c.order, err, c.want)
		}
	}
}

// TestTopKKeepsNone checks that k 0 (or below) keeps no row but still reads
// and checks every one.
func TestTopKKeepsNone(t *testing.T) {
	t.Parallel()
	for _, k := range []int{0, -3} {
		sel, got, err := selectCSV(t, strings.NewReader("id,score\na,1\nb,2\n"), domain.Asc, k)
		if err != nil || got != "id,score\n" || sel.RowsRead != 2 {
			t.Errorf("k %d: kept %q of %+v, %v; want the header alone, 2 rows read", k, got, sel, err)
		}
		_, _, err = selectCSV(t, strings.NewReader("id,score\na,1\nb,x\n"), domain.Asc, k)
		if err == nil || !strings.Contains(err.Error(), `output line 3: score "x"`) {
			t.Errorf("k %d: error %v, want one naming line 3", k, err)
		}
	}
}

// TestTopKStreams checks that how the output arrives does not matter: a
// byte at a time, the byte order marks split across reads.
func TestTopKStreams(t *testing.T) {
	t.Parallel()
	inputs := append(slices.Clone(fuzzSeeds), "\ufeff\ufeff\"\ufeffid\",score\r\na,1\r\n\"b\r\r\nc\",2\r\n", "\ufeff", "\xef\xbb")
	for _, in := range inputs {
		want, wantCSV, wantErr := selectCSV(t, strings.NewReader(in), domain.Desc, 3)
		got, gotCSV, gotErr := selectCSV(t, iotest.OneByteReader(strings.NewReader(in)), domain.Desc, 3)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotCSV != wantCSV || (want != nil && got.RowsRead != want.RowsRead) {
			t.Errorf("Select(%q) a byte at a time: %q, %v; all at once: %q, %v", in, gotCSV, gotErr, wantCSV, wantErr)
		}
	}
}

// TestTopKReadError checks that a failing reader is reported as itself,
// not as a fault of the output, whether it fails before the header or
// among the rows.
func TestTopKReadError(t *testing.T) {
	t.Parallel()
	broken := errors.New("pipe broke")
	for _, prefix := range []string{"", "\ufeff", "id,score\na,1\n", "id,score\n\"a\nb"} {
		in := io.MultiReader(strings.NewReader(prefix), iotest.ErrReader(broken))
		_, _, err := selectCSV(t, in, domain.Desc, 3)
		if !errors.Is(err, broken) || errors.Is(err, domain.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "read output: ") {
			t.Errorf("after %q: error %v, want one that wraps %v alone, saying read output", prefix, err, broken)
		}
	}
}

// TestTopKRowsOwnMemory checks that the kept rows stay valid after Select:
// the reader reuses its record, and an evicted row's slice is reused.
func TestTopKRowsOwnMemory(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	in.WriteString("id,score\n")
	for i := range 1000 {
		fmt.Fprintf(&in, "r%d,%d\n", i, i%97)
	}
	sel, _, err := selectCSV(t, strings.NewReader(in.String()), domain.Desc, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"r96", "96"}, {"r193", "96"}, {"r290", "96"}, {"r387", "96"}, {"r484", "96"}}
	if !slices.EqualFunc(sel.Rows, want, slices.Equal) || !slices.Equal(sel.Scores, []float64{96, 96, 96, 96, 96}) {
		t.Fatalf("kept %q %v, want %q", sel.Rows, sel.Scores, want)
	}
}

// BenchmarkTopK runs a workload's output through a TopK and writes what a
// worker sends, as a worker does for each task.
func BenchmarkTopK(b *testing.B) {
	for _, c := range []struct{ rows, k int }{{100_000, 100}, {100_000, 10_000}, {1_000, 1_000}} {
		r := rand.New(rand.NewPCG(1, 2))
		var sb strings.Builder
		sb.WriteString("id,name,score\n")
		for i := range c.rows {
			fmt.Fprintf(&sb, "r%d,\"molecule, %d\",%s\n", i, r.IntN(1e6), strconv.FormatFloat(r.Float64(), 'g', -1, 64))
		}
		in := sb.String()
		b.Run(fmt.Sprintf("rows=%d/k=%d", c.rows, c.k), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				tk, err := NewTopK("score", domain.Desc, c.k)
				if err != nil {
					b.Fatal(err)
				}
				sel, err := tk.Select(strings.NewReader(in))
				if err != nil {
					b.Fatal(err)
				}
				var buf bytes.Buffer
				if err := sel.WriteCSV(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
