package table

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/scimesh/scimesh/internal/domain"
)

// fuzzSeeds are outputs worth mutating: valid ones, and ones that break each
// rule once.
var fuzzSeeds = []string{
	"",
	"id,score\n",
	"id,score\na,1\nb,2.5\n",
	"id,score\r\na,-0\r\nb,0\r\n",
	"\ufeffscore,id\n1,a\n",
	"\ufeff\"\ufeffscore\",id\n1,a\n",
	"id,note,score\n\"a,b\",\"say \"\"hi\"\"\",1\n\"multi\nline\",\"x\r\r\ny\",2\n",
	"id,score\na,NaN\n",
	"id,score\na,1e999\n",
	"id,score\na,\n",
	"id,score,score\n",
	"id,value\n",
	"id,score\na\"b,1\n",
	"id,score\n\"a,1\nb,2\n",
	"id,score\na,1,2\n",
	"score\n\" 1\"\n0x1p-2\n",
	"a,score\n\\.,1\n,2\n",
}

func FuzzParseOutput(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), "score", i%4)
	}
	f.Add([]byte("x\r\r\ny,1\n"), "x\r\r\ny", 3)
	f.Fuzz(func(t *testing.T, data []byte, scoreColumn string, topK int) {
		topK %= 1000 // keep the preallocation small
		out, err := ParseOutput(data, scoreColumn, topK)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Fatalf("ParseOutput(%q): error %v does not wrap domain.ErrInvalidArgument", data, err)
			}
			return
		}
		if len(out.Rows) > max(topK, 0) || len(out.Rows) != len(out.Scores) {
			t.Fatalf("ParseOutput(%q, top_k %d): %d rows and %d scores", data, topK, len(out.Rows), len(out.Scores))
		}
		if out.Header[out.ScoreIndex] != scoreColumn {
			t.Fatalf("ParseOutput: Header[%d] is %q, want %q", out.ScoreIndex, out.Header[out.ScoreIndex], scoreColumn)
		}
		for i, rec := range out.Rows {
			if len(rec) != len(out.Header) {
				t.Fatalf("row %d has %d fields; the header has %d", i, len(rec), len(out.Header))
			}
			if math.IsNaN(out.Scores[i]) || math.IsInf(out.Scores[i], 0) {
				t.Fatalf("row %d: score %v is not finite", i, out.Scores[i])
			}
		}

		// Written back with encoding/csv, the output reads back the same.
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.Write(out.Header); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteAll(out.Rows); err != nil {
			t.Fatal(err)
		}
		again, err := ParseOutput(buf.Bytes(), scoreColumn, topK)
		if err != nil {
			t.Fatalf("re-encoded output %q does not parse: %v", buf.Bytes(), err)
		}
		if !reflect.DeepEqual(again.Header, out.Header) || !reflect.DeepEqual(again.Rows, out.Rows) {
			t.Fatalf("round trip changed the output:\n got %q %q\nwant %q %q", again.Header, again.Rows, out.Header, out.Rows)
		}
	})
}

// splitChunks cuts data at NUL bytes into chunk outputs whose indexes run
// backwards, so that Merge has to reorder them.
func splitChunks(data []byte) []ChunkOutput {
	parts := bytes.Split(data, []byte{0})
	if len(parts) > 16 {
		parts = parts[:16]
	}
	out := make([]ChunkOutput, len(parts))
	for i, p := range parts {
		out[i] = ChunkOutput{Index: len(parts) - 1 - i, Data: p}
	}
	return out
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte(""), "score", true, 3)
	f.Add([]byte("id,score\na,1\nb,3\x00id,score\nc,2\nd,3\n"), "score", true, 3)
	f.Add([]byte("id,score\nb,-0\nc,0.0\x00id,score\na,0\nm,-1\n"), "score", false, 2)
	f.Add([]byte("\x00id,score\n\x00\x00\ufeffid,score\r\na,1\r\n"), "score", true, 10)
	f.Add([]byte("id,score\na,1\x00score,id\n1,a\n"), "score", true, 10)
	f.Add([]byte("\"id\",\"score\"\n\" lead\",\"1\"\n\"x\r\r\ny\",2\x00id,score\n\\.,2\n"), "score", false, 1)
	for _, s := range fuzzSeeds {
		f.Add([]byte(s+"\x00"+s), "score", len(s)%2 == 0, len(s)%5)
	}
	f.Fuzz(func(t *testing.T, data []byte, scoreColumn string, desc bool, topK int) {
		topK %= 1000
		order := domain.Asc
		if desc {
			order = domain.Desc
		}
		in := splitChunks(data)
		var buf bytes.Buffer
		rows, err := Merge(&buf, in, scoreColumn, order, topK)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidArgument) {
				t.Fatalf("Merge: error %v does not wrap domain.ErrInvalidArgument", err)
			}
			if buf.Len() != 0 {
				t.Fatalf("Merge failed with %v but wrote %q", err, buf.Bytes())
			}
			return
		}
		if rows > max(topK, 0) {
			t.Fatalf("Merge wrote %d rows; top_k is %d", rows, topK)
		}
		want, wantRows := referenceMerge(t, in, scoreColumn, order, topK)
		if buf.String() != want || rows != wantRows {
			t.Fatalf("Merge wrote %d rows\n%q\nthe reference %d rows\n%q", rows, buf.Bytes(), wantRows, want)
		}
		if buf.Len() == 0 {
			return
		}

		// The final CSV is a valid output of the same job, ranked in order…
		out, err := ParseOutput(buf.Bytes(), scoreColumn, topK)
		if err != nil {
			t.Fatalf("Merge output %q does not parse: %v", buf.Bytes(), err)
		}
		if len(out.Rows) != rows {
			t.Fatalf("Merge output parses to %d rows; Merge reported %d", len(out.Rows), rows)
		}
		ranked := slices.IsSortedFunc(out.Scores, func(a, b float64) int {
			if order == domain.Desc {
				a, b = b, a
			}
			switch {
			case a < b:
				return -1
			case a > b:
				return 1
			}
			return 0
		})
		if !ranked {
			t.Fatalf("Merge output scores %v are not in %s order", out.Scores, order)
		}
		// …and merging it again changes nothing.
		var again bytes.Buffer
		if _, err := Merge(&again, []ChunkOutput{{Index: 0, Data: buf.Bytes()}}, scoreColumn, order, topK); err != nil {
			t.Fatalf("re-merging the output: %v", err)
		}
		if !bytes.Equal(again.Bytes(), buf.Bytes()) {
			t.Fatalf("re-merging the output wrote\n%q\nwant\n%q", again.Bytes(), buf.Bytes())
		}
	})
}

// FuzzTopK checks the streaming selector against ParseOutput and a sort:
// the same verdict and message on every output; on a valid one, its rows
// stably sorted by score in order, the first k of them; and what a worker
// sends from it, ParseOutput accepts as those rows.
func FuzzTopK(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), "score", i%2 == 0, i%4, i%3 == 0)
	}
	for i, tt := range outputRejects {
		column := tt.column
		switch column {
		case "":
			column = "score"
		case "-":
			column = ""
		}
		f.Add([]byte(tt.in), column, i%2 == 0, 2, i%3 == 0)
	}
	f.Add([]byte("id,score\na,1\nb,3\nc,-0\nd,3\ne,0\n"), "score", true, 3, false)
	f.Add([]byte("id,score\na,1\nb,3\nc,-0\nd,3\ne,0\n"), "score", false, 3, true)
	f.Fuzz(func(t *testing.T, data []byte, scoreColumn string, desc bool, k int, byteAtATime bool) {
		k %= 1000
		order := domain.Asc
		if desc {
			order = domain.Desc
		}
		tk, err := NewTopK(scoreColumn, order, k)
		if err != nil {
			if scoreColumn != "" || !errors.Is(err, domain.ErrInvalidArgument) {
				t.Fatalf("NewTopK(%q, %s, %d): %v", scoreColumn, order, k, err)
			}
			return
		}
		var r io.Reader = bytes.NewReader(data)
		if byteAtATime {
			r = iotest.OneByteReader(r)
		}
		sel, err := tk.Select(r)
		// Every row of data fits in this top_k: no line holds two rows.
		all, wantErr := ParseOutput(data, scoreColumn, len(data)+1)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("Select(%q): error %v; ParseOutput: %v", data, err, wantErr)
		}
		if err != nil {
			return
		}

		rank := make([]int, len(all.Rows))
		for i := range rank {
			rank[i] = i
		}
		slices.SortStableFunc(rank, func(a, b int) int {
			if order == domain.Desc {
				a, b = b, a
			}
			return cmp.Compare(all.Scores[a], all.Scores[b])
		})
		rank = rank[:min(len(rank), max(k, 0))]
		if !slices.Equal(sel.Header, all.Header) || sel.ScoreIndex != all.ScoreIndex || sel.RowsRead != len(all.Rows) || len(sel.Rows) != len(rank) {
			t.Fatalf("Select(%q, k %d): header %q (score at %d), %d of %d rows; ParseOutput: %q (score at %d), %d rows",
				data, k, sel.Header, sel.ScoreIndex, len(sel.Rows), sel.RowsRead, all.Header, all.ScoreIndex, len(all.Rows))
		}
		for i, j := range rank {
			if !slices.Equal(sel.Rows[i], all.Rows[j]) || sel.Scores[i] != all.Scores[j] {
				t.Fatalf("Select(%q, %s, k %d): rank %d is %q (%v), want row %d %q (%v)",
					data, order, k, i, sel.Rows[i], sel.Scores[i], j, all.Rows[j], all.Scores[j])
			}
		}

		var buf bytes.Buffer
		if err := sel.WriteCSV(&buf); err != nil {
			t.Fatal(err)
		}
		sent, err := ParseOutput(buf.Bytes(), scoreColumn, k)
		if err != nil {
			t.Fatalf("the coordinator refuses %q, sent for %q: %v", buf.Bytes(), data, err)
		}
		if !slices.Equal(sent.Header, sel.Header) || !slices.EqualFunc(sent.Rows, sel.Rows, slices.Equal) {
			t.Fatalf("sent %q, which reads back as %q %q; want %q %q", buf.Bytes(), sent.Header, sent.Rows, sel.Header, sel.Rows)
		}
	})
}
