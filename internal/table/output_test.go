package table

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestParseOutputAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		in         string
		column     string // "score" when empty
		topK       int
		wantHeader []string
		wantRows   [][]string
		wantScores []float64
	}{
		{
			name:       "plain",
			in:         "id,score\na,1\nb,2.5\n",
			topK:       2,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"a", "1"}, {"b", "2.5"}},
			wantScores: []float64{1, 2.5},
		},
		{
			name:       "header only",
			in:         "id,score\n",
			topK:       100,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{},
			wantScores: []float64{},
		},
		{
			name:       "header only without newline",
			in:         "score",
			topK:       1,
			wantHeader: []string{"score"},
			wantRows:   [][]string{},
			wantScores: []float64{},
		},
		{
			name:       "no final newline",
			in:         "id,score\na,1",
			topK:       1,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"a", "1"}},
			wantScores: []float64{1},
		},
		{
			name:       "CRLF line ends",
			in:         "id,score\r\na,1\r\nb,2\r\n",
			topK:       5,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"a", "1"}, {"b", "2"}},
			wantScores: []float64{1, 2},
		},
		{
			name:       "quoted commas quotes and newlines",
			in:         "id,note,score\n\"a,b\",\"say \"\"hi\"\"\",1\n\"multi\nline\",\"x\r\ny\",2\n",
			topK:       2,
			wantHeader: []string{"id", "note", "score"},
			wantRows:   [][]string{{"a,b", `say "hi"`, "1"}, {"multi\nline", "x\ny", "2"}},
			wantScores: []float64{1, 2},
		},
		{
			name:       "quoted header and score",
			in:         "\"id\",\"score\"\n\"a\",\"-3\"\n",
			topK:       1,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"a", "-3"}},
			wantScores: []float64{-3},
		},
		{
			name:       "blank lines are skipped",
			in:         "\nid,score\n\na,1\n\n",
			topK:       1,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"a", "1"}},
			wantScores: []float64{1},
		},
		{
			name:       "leading BOM is dropped",
			in:         "\ufeffscore,id\n1,a\n",
			topK:       1,
			wantHeader: []string{"score", "id"},
			wantRows:   [][]string{{"1", "a"}},
			wantScores: []float64{1},
		},
		{
			name:       "repeated and quoted leading BOMs are dropped",
			in:         "\ufeff\"\ufeffscore\",id\n1,a\n",
			topK:       1,
			wantHeader: []string{"score", "id"},
			wantRows:   [][]string{{"1", "a"}},
			wantScores: []float64{1},
		},
		{
			name:       "BOM elsewhere is data",
			in:         "id,score\n\ufeffa,1\n",
			topK:       1,
			wantHeader: []string{"id", "score"},
			wantRows:   [][]string{{"\ufeffa", "1"}},
			wantScores: []float64{1},
		},
		{
			name:       "number forms",
			in:         "score\n-0\n1e10\n0x1p-2\n.5\n+3\n1e-400\n",
			topK:       6,
			wantHeader: []string{"score"},
			wantRows:   [][]string{{"-0"}, {"1e10"}, {"0x1p-2"}, {".5"}, {"+3"}, {"1e-400"}},
			wantScores: []float64{math.Copysign(0, -1), 1e10, 0.25, 0.5, 3, 0},
		},
		{
			name:       "CRs before LF inside a field are dropped",
			in:         "note,score\n\"a\r\r\nb\rc\",1\n",
			topK:       1,
			wantHeader: []string{"note", "score"},
			wantRows:   [][]string{{"a\nb\rc", "1"}},
			wantScores: []float64{1},
		},
		{
			name:       "other score column",
			in:         "id,score,tanimoto\na,x,0.5\n",
			column:     "tanimoto",
			topK:       1,
			wantHeader: []string{"id", "score", "tanimoto"},
			wantRows:   [][]string{{"a", "x", "0.5"}},
			wantScores: []float64{0.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			column := tt.column
			if column == "" {
				column = "score"
			}
			got, err := ParseOutput([]byte(tt.in), column, tt.topK)
			if err != nil {
				t.Fatalf("ParseOutput(%q): got error %v, want nil", tt.in, err)
			}
			if !reflect.DeepEqual(got.Header, tt.wantHeader) {
				t.Errorf("Header: got %q, want %q", got.Header, tt.wantHeader)
			}
			if got.Header[got.ScoreIndex] != column {
				t.Errorf("ScoreIndex: got %d (%q), want the index of %q", got.ScoreIndex, got.Header[got.ScoreIndex], column)
			}
			if !reflect.DeepEqual(got.Rows, tt.wantRows) {
				t.Errorf("Rows: got %q, want %q", got.Rows, tt.wantRows)
			}
			if len(got.Scores) != len(tt.wantScores) {
				t.Fatalf("Scores: got %v, want %v", got.Scores, tt.wantScores)
			}
			for i := range got.Scores {
				if math.Float64bits(got.Scores[i]) != math.Float64bits(tt.wantScores[i]) {
					t.Errorf("Scores[%d]: got %v, want %v", i, got.Scores[i], tt.wantScores[i])
				}
			}
		})
	}
}

// outputRejects are outputs that ParseOutput refuses, with its messages.
// TopK.Select refuses them too, but for the count of rows (FuzzTopK).
var outputRejects = []struct {
	name    string
	in      string
	column  string // "score" when empty; "-" for the empty name
	topK    int    // 10 when zero
	wantMsg string // the whole message after "invalid argument: "
}{
	{"empty", "", "", 0, `output is empty; it needs a header line naming the column "score"`},
	{"only a BOM", "\ufeff", "", 0, `output is empty; it needs a header line naming the column "score"`},
	{"only blank lines", "\n\r\n\n", "", 0, `output is empty; it needs a header line naming the column "score"`},
	{"no score column", "id,value\na,1\n", "", 0, `output header has no column "score"; its columns are "id", "value"`},
	{"score column differs in case", "id,Score\n", "", 0, `output header has no column "score"; its columns are "id", "Score"`},
	{"score column with spaces", "id, score\n", "", 0, `output header has no column "score"; its columns are "id", " score"`},
	{
		"many columns listed briefly",
		"a,b,c,d,e,f,g,h,i,j,k,l\n", "", 0,
		`output header has no column "score"; its columns are "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" and 2 more`,
	},
	{"score column twice", "id,score,score\n", "", 0, `output header names the score column "score" 2 times (columns 2, 3); it must appear once`},
	{"score column three times", "score,x,score,score\n", "", 0, `output header names the score column "score" 3 times (columns 1, 3, 4); it must appear once`},
	{"empty score column name", "id,score\n", "-", 0, `the score column name is empty; name the column that holds the scores`},
	{"too many rows", "id,score\na,1\nb,2\nc,3\n", "", 2, `output has 3 rows; top_k is 2: send at most the best 2`},
	{"not a number", "id,score\na,1\nb,2\nc,abc\n", "", 0, `output line 4: score "abc" in column "score" is not a number`},
	{"empty score", "id,score\na,\n", "", 0, `output line 2: score in column "score" is empty; every row needs a finite number`},
	{"quoted empty score", "id,score\na,\"\"\n", "", 0, `output line 2: score in column "score" is empty; every row needs a finite number`},
	{"NaN", "id,score\na,NaN\n", "", 0, `output line 2: score "NaN" in column "score" is not a finite number`},
	{"Inf", "id,score\na,Inf\n", "", 0, `output line 2: score "Inf" in column "score" is not a finite number`},
	{"minus infinity", "id,score\na,-infinity\n", "", 0, `output line 2: score "-infinity" in column "score" is not a finite number`},
	{"out of range", "id,score\na,1e999\n", "", 0, `output line 2: score "1e999" in column "score" is out of range for a 64-bit float`},
	{"leading space", "id,score\na, 1\n", "", 0, `output line 2: score " 1" in column "score" is not a number`},
	{"trailing space", "id,score\na,1 \n", "", 0, `output line 2: score "1 " in column "score" is not a number`},
	{"comma decimal", "id,score\na,\"1,5\"\n", "", 0, `output line 2: score "1,5" in column "score" is not a number`},
	{
		"bad score after a multi-line field names the record's first line",
		"note,score\n\"x\ny\nz\",w\n", "", 0,
		`output line 2: score "w" in column "score" is not a number`,
	},
	{
		"bad score past top_k is reported where it is",
		"score\n1\n2\n3\nx\n", "", 2,
		`output line 5: score "x" in column "score" is not a number`,
	},
	{"too few fields", "id,score\na,1\nb\n", "", 0, `output line 3: record has 1 fields; the header has 2`},
	{"too many fields", "id,score\na,1,2\n", "", 0, `output line 2: record has 3 fields; the header has 2`},
	{
		"field count of a multi-line record names its first line",
		"id,score\n\"a\nb\",1,2\n", "", 0,
		`output line 2: record has 3 fields; the header has 2`,
	},
	{"bare quote", "id,score\na\"b,1\n", "", 0, `output line 2, column 2: a " in an unquoted field (quote the field and double the inner quotes)`},
	{
		"bare quote after a BOM counts the BOM's bytes",
		"\ufeffi\"d,score\n", "", 0,
		`output line 1, column 5: a " in an unquoted field (quote the field and double the inner quotes)`,
	},
	{"stray quote after a quoted field", "id,score\n\"a\"b,1\n", "", 0, `output line 2, column 3: a quoted field is not closed, or a " inside it is not doubled`},
	{
		"unclosed quote",
		"id,score\n\"a,1\nb,2\n", "", 0,
		`output line 3, column 5 (in the record that starts on line 2): a quoted field is not closed, or a " inside it is not doubled`,
	},
}

func TestParseOutputRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range outputRejects {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			column, topK := tt.column, tt.topK
			switch column {
			case "":
				column = "score"
			case "-":
				column = ""
			}
			if topK == 0 {
				topK = 10
			}
			got, err := ParseOutput([]byte(tt.in), column, topK)
			if err == nil {
				t.Fatalf("ParseOutput(%q): got %+v, want an error", tt.in, got)
			}
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Errorf("ParseOutput(%q): got error %v, want one that wraps domain.ErrInvalidArgument", tt.in, err)
			}
			if msg := strings.TrimPrefix(err.Error(), "invalid argument: "); msg != tt.wantMsg {
				t.Errorf("ParseOutput(%q):\n got message %s\nwant message %s", tt.in, msg, tt.wantMsg)
			}
		})
	}
}

func TestParseOutputRowsAreSafeToKeep(t *testing.T) {
	t.Parallel()
	in := []byte("id,score\na,1\nb,2\nc,3\n")
	out, err := ParseOutput(in, "score", 3)
	if err != nil {
		t.Fatalf("ParseOutput: %v", err)
	}
	for i := range in {
		in[i] = 'X'
	}
	// Rows share one backing array; appending to one must not overwrite the
	// next.
	_ = append(out.Rows[0], "extra")
	want := [][]string{{"a", "1"}, {"b", "2"}, {"c", "3"}}
	if !reflect.DeepEqual(out.Rows, want) {
		t.Errorf("Rows after changing the input and appending to a row: got %q, want %q", out.Rows, want)
	}
	if want := []string{"id", "score"}; !reflect.DeepEqual(out.Header, want) {
		t.Errorf("Header after changing the input: got %q, want %q", out.Header, want)
	}
}

func TestParseOutputAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are slow to measure")
	}
	const rows = 100
	var b strings.Builder
	b.WriteString("id,name,score\n")
	for i := range rows {
		b.WriteString("row")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(",\"quoted, name\",0.")
		b.WriteString(strings.Repeat("5", i%5+1))
		b.WriteString("\n")
	}
	in := []byte(b.String())
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := ParseOutput(in, "score", rows); err != nil {
			t.Fatal(err)
		}
	})
	// One string per record from encoding/csv, plus a small constant for the
	// reader's buffers, the header and the result.
	if limit := float64(rows + 32); allocs > limit {
		t.Errorf("ParseOutput of %d rows: got %.0f allocations, want at most %.0f", rows, allocs, limit)
	}
}

func TestParseOutputWideHeaderLargeTopK(t *testing.T) {
	t.Parallel()
	// Sizing the rows by topK × width alone would ask for 10^10 strings.
	header := "score" + strings.Repeat(",c", 99_999)
	for _, in := range []string{header + "\n", header + "\n1" + strings.Repeat(",x", 99_999) + "\n"} {
		out, err := ParseOutput([]byte(in), "score", domain.MaxTopK)
		if err != nil {
			t.Fatalf("ParseOutput of a %d-column output: %v", 100_000, err)
		}
		if want := strings.Count(in, "\n") - 1; len(out.Rows) != want {
			t.Errorf("ParseOutput of a %d-column output: got %d rows, want %d", 100_000, len(out.Rows), want)
		}
	}
}
