package table

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	type chunk struct {
		off, length int64
		rows        int
	}
	tests := []struct {
		name       string
		in         string
		hasHeader  bool
		chunkRows  int
		wantHeader string
		want       []chunk
	}{
		{"even", "h\n1\n2\n3\n4\n", true, 2, "h\n", []chunk{{2, 4, 2}, {6, 4, 2}}},
		{"last chunk short", "h\n1\n2\n3\n", true, 2, "h\n", []chunk{{2, 4, 2}, {6, 2, 1}}},
		{"one chunk", "h\n1\n2\n3\n", true, 10, "h\n", []chunk{{2, 6, 3}}},
		{"one row each", "h\n1\n2\n", true, 1, "h\n", []chunk{{2, 2, 1}, {4, 2, 1}}},
		{"no header", "1\n2\n3\n", false, 2, "", []chunk{{0, 4, 2}, {4, 2, 1}}},
		{"no header, one row", "1\n", false, 1, "", []chunk{{0, 2, 1}}},
		{
			"newlines inside quotes",
			"\"h\n1\",h2\n\"a\nb\",\"\"\"\"\n\"c,\n\n\"\"\",d\ne,f\n", true, 2,
			"\"h\n1\",h2\n", []chunk{{9, 22, 2}, {31, 4, 1}},
		},
		{"quoted empty rows", "h\n\"\"\n\"\"\n\"\"\n", true, 2, "h\n", []chunk{{2, 6, 2}, {8, 3, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Split(strings.NewReader(tt.in), tt.hasHeader, tt.chunkRows)
			if err != nil {
				t.Fatalf("Split(%q, %v, %d): %v", tt.in, tt.hasHeader, tt.chunkRows, err)
			}
			if string(got.Header) != tt.wantHeader {
				t.Errorf("Header: got %q, want %q", got.Header, tt.wantHeader)
			}
			var gotChunks []chunk
			for _, c := range got.Chunks {
				gotChunks = append(gotChunks, chunk{c.Offset, c.Length, c.Rows})
			}
			if !equalChunks(gotChunks, tt.want) {
				t.Errorf("Split(%q, %v, %d): got chunks %+v, want %+v", tt.in, tt.hasHeader, tt.chunkRows, gotChunks, tt.want)
			}
			checkChunks(t, []byte(tt.in), tt.hasHeader, tt.chunkRows, got)
		})
	}
}

func equalChunks[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSplitRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		hasHeader bool
		chunkRows int
		want      string
		invalid   bool // wraps domain.ErrInvalidArgument
	}{
		{"empty", "", true, 10, "invalid argument: the table is empty", true},
		{"empty without header", "", false, 10, "invalid argument: the table is empty", true},
		{"header only", "id,score\n", true, 10, "invalid argument: the table has a header but no rows", true},
		{"multi-line header only", "\"id\nx\",score\n", true, 10, "invalid argument: the table has a header but no rows", true},
		{"no chunk rows", "h\n1\n", true, 0, "invalid argument: chunk_rows is 0; it must be at least 1", true},
		{"no final newline", "h\n1", true, 10, "split table: the table is not normalized: it ends inside a record at byte 3", false},
		{"ends inside quotes", "h\n\"1\n", true, 10, "split table: the table is not normalized: it ends inside a record at byte 5", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Split(strings.NewReader(tt.in), tt.hasHeader, tt.chunkRows)
			if err == nil {
				t.Fatalf("Split(%q): got %+v, want error %q", tt.in, got, tt.want)
			}
			if err.Error() != tt.want || errors.Is(err, domain.ErrInvalidArgument) != tt.invalid {
				t.Errorf("Split(%q):\n got error %v (invalid argument: %v)\nwant %s (invalid argument: %v)",
					tt.in, err, errors.Is(err, domain.ErrInvalidArgument), tt.want, tt.invalid)
			}
		})
	}
}

func TestSplitTooManyChunks(t *testing.T) {
	t.Parallel()
	s := newSplitter(false, 2, 3)
	in := strings.Repeat("1\n", 7)
	if err := s.read(strings.NewReader(in), 4); err == nil || err.Error() != "invalid argument: the table makes more than 3 chunks of 2 rows; raise chunk_rows" {
		t.Errorf("Split of 7 rows into chunks of 2, at most 3 chunks: got error %v", err)
	}
	s = newSplitter(false, 2, 3)
	if err := s.read(strings.NewReader(in[2:]), 4); err != nil || len(s.res.Chunks) != 3 {
		t.Errorf("Split of 6 rows into chunks of 2, at most 3 chunks: got %d chunks, error %v; want 3 chunks", len(s.res.Chunks), err)
	}
}

func TestSplitReadError(t *testing.T) {
	t.Parallel()
	errNet := errors.New("connection reset")
	_, err := Split(io.MultiReader(strings.NewReader("h\n1\n"), iotest.ErrReader(errNet)), true, 1)
	if !errors.Is(err, errNet) {
		t.Errorf("Split of a failing reader: got error %v, want one that wraps %v", err, errNet)
	}
}

// TestSplitNormalized splits the output of Normalize for generated tables
// in every way, through windows of every size, and checks every chunk.
func TestSplitNormalized(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	tables := 0
	for tables < 300 {
		table, _, fault := reference(genTable(r, 40))
		if fault != nil || len(table) == 0 {
			continue
		}
		tables++
		for _, hasHeader := range []bool{true, false} {
			for _, chunkRows := range []int{1, 2, 3, 7, 1000} {
				bufSize := 1 + r.IntN(40)
				s := newSplitter(hasHeader, chunkRows, domain.MaxChunks)
				err := s.read(iotest.HalfReader(bytes.NewReader(table)), bufSize)
				if hasHeader && firstRecordBytes(table) == len(table) {
					if err == nil || err.Error() != "invalid argument: the table has a header but no rows" {
						t.Fatalf("Split(%q) with a header: got error %v, want the table has a header but no rows", table, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Split(%q, %v, %d) through a %d-byte window: %v", table, hasHeader, chunkRows, bufSize, err)
				}
				checkChunks(t, table, hasHeader, chunkRows, &s.res)
				got, err := Split(bytes.NewReader(table), hasHeader, chunkRows)
				if err != nil || !equalChunks(got.Chunks, s.res.Chunks) || !bytes.Equal(got.Header, s.res.Header) {
					t.Fatalf("Split(%q, %v, %d) depends on the window size: %+v, %v; with a %d-byte window %+v",
						table, hasHeader, chunkRows, got, err, bufSize, s.res)
				}
			}
		}
	}
}

// checkChunks checks a split of table: the header once and the ranges in
// order make up the table, each chunk reads with encoding/csv as the header
// and exactly chunkRows records (the last 1 to chunkRows), and each hash is
// that of the header and the range.
func checkChunks(t *testing.T, table []byte, hasHeader bool, chunkRows int, c *Chunking) {
	t.Helper()
	whole := bytes.Clone(c.Header)
	var rows int64
	width := -1
	for i, ch := range c.Chunks {
		if ch.Offset != int64(len(whole)) || ch.Offset+ch.Length > int64(len(table)) {
			t.Fatalf("Split(%q): chunk %d at %d+%d does not follow the previous one, which end at %d", table, i, ch.Offset, ch.Length, len(whole))
		}
		rangeBytes := table[ch.Offset : ch.Offset+ch.Length]
		whole = append(whole, rangeBytes...)
		download := append(bytes.Clone(c.Header), rangeBytes...)
		if ch.SHA256 != sha256.Sum256(download) {
			t.Errorf("Split(%q): chunk %d has the wrong sha256", table, i)
		}
		recs, err := csv.NewReader(bytes.NewReader(download)).ReadAll()
		if err != nil {
			t.Fatalf("Split(%q): chunk %d %q does not read: %v", table, i, download, err)
		}
		if width < 0 {
			width = len(recs[0])
		}
		dataRecs := len(recs)
		if hasHeader {
			dataRecs--
		}
		last := i == len(c.Chunks)-1
		if dataRecs != ch.Rows || (!last && ch.Rows != chunkRows) || ch.Rows < 1 || ch.Rows > chunkRows {
			t.Errorf("Split(%q, chunk_rows %d): chunk %d %q reads as %d rows; says %d", table, chunkRows, i, download, dataRecs, ch.Rows)
		}
		rows += int64(ch.Rows)
	}
	if !bytes.Equal(whole, table) {
		t.Errorf("Split(%q): the header and the chunks make up %q", table, whole)
	}
	if rows != c.Rows {
		t.Errorf("Split(%q): the chunks hold %d rows; Rows says %d", table, rows, c.Rows)
	}
	all, err := csv.NewReader(bytes.NewReader(table)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(all)); hasHeader && rows != want-1 || !hasHeader && rows != want {
		t.Errorf("Split(%q, header %v): %d rows in chunks; the table has %d records", table, hasHeader, rows, want)
	}
}

func FuzzSplit(f *testing.F) {
	for i, s := range normalizeSeeds {
		f.Add([]byte(s), uint8(i), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, in []byte, chunkRows uint8, hasHeader bool) {
		var table bytes.Buffer
		if _, err := Normalize(&table, bytes.NewReader(in)); err != nil {
			return
		}
		rows := int(chunkRows)%16 + 1
		c, err := Split(bytes.NewReader(table.Bytes()), hasHeader, rows)
		if hasHeader && firstRecordBytes(table.Bytes()) == table.Len() {
			if err == nil || err.Error() != "invalid argument: the table has a header but no rows" {
				t.Fatalf("Split(%q) with a header: got error %v, want the table has a header but no rows", table.Bytes(), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Split(%q, %v, %d): %v", table.Bytes(), hasHeader, rows, err)
		}
		checkChunks(t, table.Bytes(), hasHeader, rows, c)
	})
}
