package table

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// chunks builds chunk outputs with indexes 0, 1, 2, … from their texts.
func chunks(data ...string) []ChunkOutput {
	out := make([]ChunkOutput, len(data))
	for i, d := range data {
		out[i] = ChunkOutput{Index: i, Data: []byte(d)}
	}
	return out
}

func TestMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		chunks   []ChunkOutput
		order    domain.Order
		topK     int
		want     string
		wantRows int
	}{
		{
			name:     "desc",
			chunks:   chunks("id,score\na,1\nb,3\n", "id,score\nc,2\nd,3\n"),
			order:    domain.Desc,
			topK:     3,
			want:     "id,score\nb,3\nd,3\nc,2\n",
			wantRows: 3,
		},
		{
			name:     "asc",
			chunks:   chunks("id,score\na,1\nb,3\n", "id,score\nc,2\nd,3\n"),
			order:    domain.Asc,
			topK:     3,
			want:     "id,score\na,1\nc,2\nb,3\n",
			wantRows: 3,
		},
		{
			name:     "top_k larger than all rows",
			chunks:   chunks("id,score\na,1\nb,3\n", "id,score\nc,2\nd,3\n"),
			order:    domain.Desc,
			topK:     100,
			want:     "id,score\nb,3\nd,3\nc,2\na,1\n",
			wantRows: 4,
		},
		{
			name:     "top_k 1",
			chunks:   chunks("id,score\na,1\nb,3\n", "id,score\nc,2\nd,3\n"),
			order:    domain.Asc,
			topK:     1,
			want:     "id,score\na,1\n",
			wantRows: 1,
		},
		{
			name:     "top_k 0 keeps the header",
			chunks:   chunks("id,score\na,1\n"),
			order:    domain.Desc,
			topK:     0,
			want:     "id,score\n",
			wantRows: 0,
		},
		{
			name:     "negative top_k counts as 0",
			chunks:   chunks("id,score\na,1\n"),
			order:    domain.Asc,
			topK:     -5,
			want:     "id,score\n",
			wantRows: 0,
		},
		{
			name: "ties go to the lower chunk index, not the earlier slice position",
			chunks: []ChunkOutput{
				{Index: 7, Data: []byte("id,score\nseven,5\n")},
				{Index: 2, Data: []byte("id,score\ntwo,5\n")},
				{Index: 4, Data: []byte("id,score\nfour,5\n")},
			},
			order:    domain.Desc,
			topK:     2,
			want:     "id,score\ntwo,5\nfour,5\n",
			wantRows: 2,
		},
		{
			name:     "ties within a chunk keep the chunk's row order",
			chunks:   chunks("id,score\nx,5\ny,5\nz,5\n"),
			order:    domain.Asc,
			topK:     2,
			want:     "id,score\nx,5\ny,5\n",
			wantRows: 2,
		},
		{
			name:     "-0 and 0 tie, desc",
			chunks:   chunks("id,score\nb,-0\nc,0.0\n", "id,score\na,0\nm,-1\n"),
			order:    domain.Desc,
			topK:     3,
			want:     "id,score\nb,-0\nc,0.0\na,0\n",
			wantRows: 3,
		},
		{
			name:     "-0 and 0 tie, asc",
			chunks:   chunks("id,score\na,0\n", "id,score\nb,-0\nc,0e5\n"),
			order:    domain.Asc,
			topK:     2,
			want:     "id,score\na,0\nb,-0\n",
			wantRows: 2,
		},
		{
			name: "-0 and 0 tie across chunk order",
			chunks: []ChunkOutput{
				{Index: 1, Data: []byte("id,score\nzero,0\n")},
				{Index: 0, Data: []byte("id,score\nnegzero,-0\n")},
			},
			order:    domain.Desc,
			topK:     1,
			want:     "id,score\nnegzero,-0\n",
			wantRows: 1,
		},
		{
			name:     "a chunk over top_k contributes only its best rows",
			chunks:   chunks("id,score\na,1\nb,2\nc,3\nd,4\n", "id,score\ne,2.5\n"),
			order:    domain.Desc,
			topK:     3,
			want:     "id,score\nd,4\nc,3\ne,2.5\n",
			wantRows: 3,
		},
		{
			name: "fields are re-encoded canonically",
			chunks: chunks(
				"\"id\",\"note\",\"score\"\r\n\"a\",\"plain\",\"1\"\r\n\"b c\",\"x,y\",\"2\"\r\n",
				"\ufeffid,note,score\n\" lead\",\"say \"\"hi\"\"\",3\n\"two\nlines\",\\.,0\n",
			),
			order:    domain.Desc,
			topK:     10,
			want:     "id,note,score\n\" lead\",\"say \"\"hi\"\"\",3\nb c,\"x,y\",2\na,plain,1\n\"two\nlines\",\"\\.\",0\n",
			wantRows: 4,
		},
		{
			name:     "no chunks writes nothing",
			chunks:   nil,
			order:    domain.Desc,
			topK:     10,
			want:     "",
			wantRows: 0,
		},
		{
			name:     "empty chunks write nothing",
			chunks:   chunks("", "\n", "\ufeff", "\r\n\r\n"),
			order:    domain.Desc,
			topK:     10,
			want:     "",
			wantRows: 0,
		},
		{
			name:     "header-only chunks write the header",
			chunks:   chunks("", "id,score\n", "", "id,\"score\""),
			order:    domain.Asc,
			topK:     10,
			want:     "id,score\n",
			wantRows: 0,
		},
		{
			name:     "empty chunks are skipped among full ones",
			chunks:   chunks("", "id,score\na,1\n", "", "id,score\nb,2\n"),
			order:    domain.Desc,
			topK:     10,
			want:     "id,score\nb,2\na,1\n",
			wantRows: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			rows, err := Merge(&buf, tt.chunks, "score", tt.order, tt.topK)
			if err != nil {
				t.Fatalf("Merge: got error %v, want nil", err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("Merge wrote\n%q\nwant\n%q", got, tt.want)
			}
			if rows != tt.wantRows {
				t.Errorf("Merge rows: got %d, want %d", rows, tt.wantRows)
			}
		})
	}
}

func TestMergeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		chunks      []ChunkOutput
		column      string
		order       domain.Order
		wantInvalid bool // the error wraps domain.ErrInvalidArgument
		wantMsg     string
	}{
		{
			name: "header mismatch names both chunks",
			chunks: []ChunkOutput{
				{Index: 5, Data: []byte("id,score,extra\na,1,x\n")},
				{Index: 2, Data: []byte("id,score\nb,2\n")},
			},
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 5 output header has 3 columns ("id", "score", "extra"); chunk 2 output header has 2 ("id", "score"); all chunk outputs must have the same header`,
		},
		{
			name:        "header order mismatch",
			chunks:      chunks("id,score\n", "", "score,id\n"),
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 2 output header differs from chunk 0 output header at column 1: "score" vs "id"; all chunk outputs must have the same header`,
		},
		{
			name: "header mismatch past the columns a message can list",
			chunks: chunks(
				"score,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12\n",
				"score,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,C12\n",
			),
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 1 output header differs from chunk 0 output header at column 12: "C12" vs "c12"; all chunk outputs must have the same header`,
		},
		{
			name:        "missing score column",
			chunks:      chunks("", "id,value\na,1\n"),
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 1 output header has no column "score"; its columns are "id", "value"`,
		},
		{
			name:        "bad score names the chunk and line",
			chunks:      chunks("id,score\na,1\n", "id,score\nb,2\nc,NaN\n"),
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 1 output line 3: score "NaN" in column "score" is not a finite number`,
		},
		{
			name:        "a negative chunk index is named as it is",
			chunks:      []ChunkOutput{{Index: -1, Data: []byte("id,score\na,x\n")}},
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk -1 output line 2: score "x" in column "score" is not a number`,
		},
		{
			name:        "malformed CSV names the chunk",
			chunks:      chunks("id,score\na,1,2\n"),
			wantInvalid: true,
			wantMsg:     `invalid argument: chunk 0 output line 2: record has 3 fields; the header has 2`,
		},
		{
			name:        "unknown order",
			chunks:      chunks("id,score\na,1\n"),
			order:       "up",
			wantInvalid: true,
			wantMsg:     `invalid argument: order "up" must be "desc" or "asc"`,
		},
		{
			name:        "empty score column name",
			chunks:      chunks("id,score\na,1\n"),
			column:      "-",
			wantInvalid: true,
			wantMsg:     `invalid argument: the score column name is empty; name the column that holds the scores`,
		},
		{
			name: "duplicate chunk index",
			chunks: []ChunkOutput{
				{Index: 3, Data: []byte("id,score\na,1\n")},
				{Index: 3, Data: []byte("id,score\nb,1\n")},
			},
			wantMsg: `table: merge: chunk 3 is passed twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			column, order := tt.column, tt.order
			switch column {
			case "":
				column = "score"
			case "-":
				column = ""
			}
			if order == "" {
				order = domain.Desc
			}
			var buf bytes.Buffer
			rows, err := Merge(&buf, tt.chunks, column, order, 10)
			if err == nil {
				t.Fatalf("Merge: got %d rows and no error, want error %q", rows, tt.wantMsg)
			}
			if got := errors.Is(err, domain.ErrInvalidArgument); got != tt.wantInvalid {
				t.Errorf("errors.Is(%v, domain.ErrInvalidArgument): got %v, want %v", err, got, tt.wantInvalid)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Merge error:\n got %s\nwant %s", err, tt.wantMsg)
			}
			if buf.Len() != 0 || rows != 0 {
				t.Errorf("Merge failed but wrote %q and reported %d rows; want nothing", buf.String(), rows)
			}
		})
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestMergeWriteError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk full")
	_, err := Merge(failingWriter{boom}, chunks("id,score\na,1\n"), "score", domain.Desc, 10)
	if !errors.Is(err, boom) {
		t.Errorf("Merge into a failing writer: got error %v, want one wrapping %v", err, boom)
	}
}

// referenceMerge is the obvious, slow merge: read every row of every chunk
// in chunk index order, sort them stably by score alone, keep the first topK.
// Stability supplies the tie-break by chunk index, then row order.
func referenceMerge(t testing.TB, in []ChunkOutput, scoreColumn string, order domain.Order, topK int) (string, int) {
	t.Helper()
	in = slices.Clone(in)
	sort.Slice(in, func(i, j int) bool { return in[i].Index < in[j].Index })
	type row struct {
		score float64
		rec   []string
	}
	var (
		header []string
		all    []row
	)
	for _, c := range in {
		out, err := ParseOutput(c.Data, scoreColumn, math.MaxInt)
		if err != nil {
			if strings.Contains(err.Error(), "output is empty") {
				continue
			}
			t.Fatalf("reference: chunk %d: %v", c.Index, err)
		}
		if header == nil {
			header = out.Header
		}
		for i, rec := range out.Rows {
			all = append(all, row{out.Scores[i], rec})
		}
	}
	if header == nil {
		return "", 0
	}
	sort.SliceStable(all, func(i, j int) bool {
		if order == domain.Desc {
			return all[i].score > all[j].score
		}
		return all[i].score < all[j].score
	})
	all = all[:min(len(all), max(topK, 0))]
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(header); err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if err := w.Write(r.rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	return buf.String(), len(all)
}

// randomChunks makes a job's chunk outputs with many equal scores spelled in
// different ways, fields that need quoting, unnecessary quoting, CRLF and
// BOMs, empty and header-only chunks, and sparse, unordered chunk indexes.
func randomChunks(r *rand.Rand, topK int) []ChunkOutput {
	headers := [][]string{
		{"id", "note", "score"},
		{"score", "id"},
		{"score"},
		{"id", "score", "a,b", "x \"y\""},
	}
	header := headers[r.IntN(len(headers))]
	scoreAt := slices.Index(header, "score")
	spellings := [][]string{
		{"-2", "-2.0", "-2e0"},
		{"-1", "-1.00", "-0x1p0"},
		{"0", "-0", "0.0", "-0.0", "0e9", "+0"},
		{"0.5", ".5", "5e-1", "0x1p-1"},
		{"1", "1.0", "1e0", "+1", "0x1p0"},
		{"2", "2.000", "2E0"},
	}
	notes := []string{"", "plain", "a,b", `say "hi"`, "multi\nline", "cr\r\nlf", " lead", `\.`, "ünï"}
	n := r.IntN(12)
	indexes := r.Perm(3 * n)[:n]
	out := make([]ChunkOutput, n)
	for c := range out {
		var b strings.Builder
		eol := "\n"
		if r.IntN(3) == 0 {
			eol = "\r\n"
		}
		switch r.IntN(10) {
		case 0:
			// An empty output: no header at all.
			b.WriteString([]string{"", "\n", "\ufeff", "\r\n"}[r.IntN(4)])
			out[c] = ChunkOutput{Index: indexes[c], Data: []byte(b.String())}
			continue
		case 1:
			b.WriteString("\ufeff")
		}
		writeRecord(r, &b, header, eol)
		rows := r.IntN(topK + 3) // a few chunks go over top_k
		if r.IntN(8) == 0 {
			rows = 0
		}
		for i := range rows {
			rec := make([]string, len(header))
			for f := range rec {
				switch {
				case f == scoreAt:
					s := spellings[r.IntN(len(spellings))]
					rec[f] = s[r.IntN(len(s))]
				case header[f] == "id":
					rec[f] = fmt.Sprintf("c%d-r%d", indexes[c], i)
				default:
					rec[f] = notes[r.IntN(len(notes))]
				}
			}
			writeRecord(r, &b, rec, eol)
		}
		data := b.String()
		if r.IntN(4) == 0 {
			data = strings.TrimSuffix(data, eol)
		}
		out[c] = ChunkOutput{Index: indexes[c], Data: []byte(data)}
	}
	return out
}

// writeRecord writes rec as a CSV line, quoting each field when it must and
// at random when it need not.
func writeRecord(r *rand.Rand, b *strings.Builder, rec []string, eol string) {
	for i, f := range rec {
		if i > 0 {
			b.WriteByte(',')
		}
		if strings.ContainsAny(f, ",\"\r\n") || r.IntN(3) == 0 {
			b.WriteString(`"` + strings.ReplaceAll(f, `"`, `""`) + `"`)
		} else {
			b.WriteString(f)
		}
	}
	b.WriteString(eol)
}

func TestMergeMatchesReference(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x5c1))
		topK := 1 + r.IntN(20)
		order := domain.Desc
		if seed%2 == 1 {
			order = domain.Asc
		}
		in := randomChunks(r, topK)
		want, wantRows := referenceMerge(t, in, "score", order, topK)

		var buf bytes.Buffer
		rows, err := Merge(&buf, in, "score", order, topK)
		if err != nil {
			t.Fatalf("seed %d: Merge: %v", seed, err)
		}
		if got := buf.String(); got != want || rows != wantRows {
			t.Fatalf("seed %d (%s, top_k %d): Merge wrote %d rows\n%q\nwant %d rows\n%q", seed, order, topK, rows, got, wantRows, want)
		}

		// The same chunks in another order give the same bytes.
		for range 3 {
			shuffled := slices.Clone(in)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			var again bytes.Buffer
			if _, err := Merge(&again, shuffled, "score", order, topK); err != nil {
				t.Fatalf("seed %d shuffled: Merge: %v", seed, err)
			}
			if again.String() != want {
				t.Fatalf("seed %d: Merge of shuffled chunks wrote\n%q\nwant\n%q", seed, again.String(), want)
			}
		}
	}
}

func BenchmarkMerge(b *testing.B) {
	const (
		nChunks = 1000
		perRows = 100
		topK    = 100
	)
	r := rand.New(rand.NewPCG(1, 2))
	in := make([]ChunkOutput, nChunks)
	total := 0
	for c := range in {
		var sb strings.Builder
		sb.WriteString("id,name,score\n")
		for i := range perRows {
			fmt.Fprintf(&sb, "c%d-r%d,\"molecule, %d\",%s\n", c, i, r.IntN(1e6),
				strconv.FormatFloat(r.Float64(), 'g', -1, 64))
		}
		in[c] = ChunkOutput{Index: c, Data: []byte(sb.String())}
		total += sb.Len()
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		var buf bytes.Buffer
		rows, err := Merge(&buf, in, "score", domain.Desc, topK)
		if err != nil || rows != topK {
			b.Fatalf("Merge: got %d rows, error %v; want %d rows", rows, err, topK)
		}
	}
}

func BenchmarkParseOutput(b *testing.B) {
	const rows = 100
	var sb strings.Builder
	sb.WriteString("id,name,score\n")
	for i := range rows {
		fmt.Fprintf(&sb, "r%d,\"molecule, %d\",0.%d\n", i, i*7919, i*104729)
	}
	in := []byte(sb.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseOutput(in, "score", rows); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMergerMatchesReference: chunk outputs added one at a time, each
// buffer overwritten once Add returns (as the stitcher's pages are
// dropped), give exactly the reference's bytes.
func TestMergerMatchesReference(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x3e7))
		topK := 1 + r.IntN(20)
		order := domain.Desc
		if seed%2 == 1 {
			order = domain.Asc
		}
		in := randomChunks(r, topK)
		want, wantRows := referenceMerge(t, in, "score", order, topK)
		slices.SortFunc(in, func(a, b ChunkOutput) int { return a.Index - b.Index })

		m, err := NewMerger("score", order, topK)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range in {
			data := slices.Clone(c.Data)
			if err := m.Add(ChunkOutput{Index: c.Index, Data: data}); err != nil {
				t.Fatalf("seed %d: Add(chunk %d): %v", seed, c.Index, err)
			}
			for i := range data {
				data[i] = 'X' // a kept row must not point into the buffer
			}
		}
		var buf bytes.Buffer
		rows, err := m.Finish(&buf)
		if err != nil {
			t.Fatalf("seed %d: Finish: %v", seed, err)
		}
		if got := buf.String(); got != want || rows != wantRows {
			t.Fatalf("seed %d (%s, top_k %d): Merger wrote %d rows\n%q\nwant %d rows\n%q", seed, order, topK, rows, got, wantRows, want)
		}
	}
}

// TestMergerRefusesOrder: chunks must come by ascending index, each once.
func TestMergerRefusesOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		second int
		want   string
	}{
		{3, "chunk 3 is passed twice"},
		{2, "chunk 2 is passed after chunk 3; chunks must come by ascending index"},
	} {
		m, err := NewMerger("score", domain.Desc, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Add(ChunkOutput{Index: 3, Data: []byte("id,score\na,1\n")}); err != nil {
			t.Fatal(err)
		}
		err = m.Add(ChunkOutput{Index: c.second, Data: []byte("id,score\nb,2\n")})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(chunk %d) after chunk 3 = %v; want an error saying %q", c.second, err, c.want)
		}
	}
	if _, err := NewMerger("score", "sideways", 5); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("NewMerger with order sideways = %v; want ErrInvalidArgument", err)
	}
}
