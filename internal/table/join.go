package table

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/scimesh/scimesh/internal/domain"
)

// LookupColumns reads a chunk's input CSV, header line first, and returns
// for each of ids the values of columns on the input row whose idColumn
// holds it. Every id must be on some row: one that is not is an error
// naming it. An id on several rows is found when those rows agree on
// columns, and an error otherwise, since no one could tell which row an
// output meant. A column missing from the header is an error too. Errors
// about the data wrap domain.ErrInvalidArgument.
//
// It keeps only the values of ids and reads one record at a time, so a
// chunk of any size costs the memory of the rows asked for.
func LookupColumns(input io.Reader, idColumn string, columns, ids []string) (map[string][]string, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	r := csv.NewReader(input)
	r.ReuseRecord = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, domain.Invalidf("the input has no header line to find column %q in", idColumn)
	}
	if err != nil {
		return nil, domain.Invalidf("read the input's header: %v", err)
	}
	header = slices.Clone(header)
	idAt := slices.Index(header, idColumn)
	if idAt < 0 {
		return nil, domain.Invalidf("the input has no column %q (the id column); its header is %s", idColumn, quoteNames(header))
	}
	at := make([]int, len(columns))
	for i, c := range columns {
		if at[i] = slices.Index(header, c); at[i] < 0 {
			return nil, domain.Invalidf("the input has no column %q; its header is %s", c, quoteNames(header))
		}
	}
	found := make(map[string][]string, len(want))
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, domain.Invalidf("read the input: %v", err)
		}
		id := rec[idAt]
		if !want[id] {
			continue
		}
		vals := make([]string, len(at))
		for i, j := range at {
			vals[i] = rec[j]
		}
		prev, seen := found[id]
		if !seen {
			found[id] = vals
			continue
		}
		for i := range vals {
			if vals[i] != prev[i] {
				line, _ := r.FieldPos(0)
				return nil, domain.Invalidf("id %q is on two input rows with different %q (%q, then %q on line %d): ids must be unique to join columns",
					id, columns[i], prev[i], vals[i], line)
			}
		}
	}
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			return nil, domain.Invalidf("output id %q is not in the input's column %q", id, idColumn)
		}
	}
	return found, nil
}

// IDs returns the values of o's idColumn, one per row, in row order; an
// output without that column is an error wrapping
// domain.ErrInvalidArgument.
func (o *Output) IDs(idColumn string) ([]string, error) {
	at := slices.Index(o.Header, idColumn)
	if at < 0 {
		return nil, domain.Invalidf("output has no column %q to join the input's columns by; its header is %s", idColumn, quoteNames(o.Header))
	}
	ids := make([]string, len(o.Rows))
	for i, row := range o.Rows {
		ids[i] = row[at]
	}
	return ids, nil
}

// LookupFunc returns the values of the joined columns for ids of the
// chunk with the given index, as LookupColumns does from its input.
type LookupFunc func(chunk int, ids []string) (map[string][]string, error)

// Join appends columns to the rows kept so far, and their names to the
// header: each row gets the values lookup gives for its idColumn in its
// chunk. Lookup is called once per chunk that has kept rows, by ascending
// index. Call Join after the last Add and before Finish; with no rows
// kept it does nothing. An error of lookup is returned naming the chunk.
func (m *Merger) Join(idColumn string, columns []string, lookup LookupFunc) error {
	if m.header == nil || len(m.k.entries) == 0 {
		return nil
	}
	at := slices.Index(m.header, idColumn)
	if at < 0 {
		return domain.Invalidf("the chunk outputs have no column %q to join the input's columns by; their header is %s", idColumn, quoteNames(m.header))
	}
	byChunk := make(map[int][]int) // chunk → positions in m.k.entries
	for i := range m.k.entries {
		c := m.k.entries[i].chunk
		byChunk[c] = append(byChunk[c], i)
	}
	chunks := make([]int, 0, len(byChunk))
	for c := range byChunk {
		chunks = append(chunks, c)
	}
	slices.Sort(chunks)
	for _, c := range chunks {
		rows := byChunk[c]
		ids := make([]string, 0, len(rows))
		for _, i := range rows {
			ids = append(ids, m.k.entries[i].rec[at])
		}
		vals, err := lookup(c, ids)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", c, err)
		}
		for _, i := range rows {
			e := &m.k.entries[i]
			e.rec = append(e.rec, vals[e.rec[at]]...)
		}
	}
	m.header = append(slices.Clip(m.header), columns...)
	return nil
}
