package table

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestLookupColumns(t *testing.T) {
	t.Parallel()
	const input = "id,smiles,name\n" +
		"a,CCO,\"ethanol, absolute\"\n" +
		"b,\"C\nC\",\"say \"\"hi\"\"\"\n" +
		"c,CCC,propane\n" +
		"a,CCO,\"ethanol, absolute\"\n" +
		"d,N,ammonia\n" +
		"d,O,water\n"
	tests := []struct {
		name    string
		columns []string
		ids     []string
		want    map[string][]string
		wantErr string
	}{
		{name: "quoted fields", columns: []string{"name", "smiles"}, ids: []string{"b", "c"},
			want: map[string][]string{"b": {`say "hi"`, "C\nC"}, "c": {"propane", "CCC"}}},
		{name: "a duplicate that agrees", columns: []string{"smiles"}, ids: []string{"a"},
			want: map[string][]string{"a": {"CCO"}}},
		{name: "an id asked twice", columns: []string{"smiles"}, ids: []string{"c", "c"},
			want: map[string][]string{"c": {"CCC"}}},
		{name: "a duplicate that differs", columns: []string{"smiles"}, ids: []string{"d"},
			wantErr: `id "d" is on two input rows with different "smiles" ("N", then "O" on line 8)`},
		{name: "a duplicate that differs in a column not asked for", columns: []string{"name"}, ids: []string{"a"},
			want: map[string][]string{"a": {"ethanol, absolute"}}},
		{name: "a missing id", columns: []string{"smiles"}, ids: []string{"a", "zz"},
			wantErr: `output id "zz" is not in the input's column "id"`},
		{name: "a missing column", columns: []string{"mass"}, ids: []string{"a"},
			wantErr: `the input has no column "mass"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LookupColumns(strings.NewReader(input), "id", tt.columns, tt.ids)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, domain.ErrInvalidArgument) {
					t.Fatalf("err = %v, want an invalid argument containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := LookupColumns(strings.NewReader(input), "key", []string{"name"}, []string{"a"}); err == nil ||
		!strings.Contains(err.Error(), `no column "key" (the id column)`) {
		t.Errorf("a missing id column: err = %v", err)
	}
}

func TestOutputIDs(t *testing.T) {
	t.Parallel()
	out, err := ParseOutput([]byte("score,id\n1,x\n0.5,y\n"), "score", 10)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := out.IDs("id")
	if err != nil || !slices.Equal(ids, []string{"x", "y"}) {
		t.Errorf("IDs = %q, %v; want [x y]", ids, err)
	}
	if _, err := out.IDs("key"); err == nil || !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("IDs of a missing column: err = %v, want an invalid argument", err)
	}
}

// TestMergerJoin merges three chunks and joins their input columns: the
// kept rows get the values of their own chunk's rows (ids repeat across
// chunks), the header the names, and a chunk without kept rows is never
// looked up.
func TestMergerJoin(t *testing.T) {
	t.Parallel()
	inputs := map[int]string{
		0: "id,fp,smiles\nx,00,C\ny,01,CC\n",
		1: "id,fp,smiles\nx,02,\"N,N\"\n",
		2: "id,fp,smiles\nz,03,O\n",
	}
	outputs := []ChunkOutput{
		{Index: 0, Data: []byte("id,score\nx,0.9\ny,0.1\n")},
		{Index: 1, Data: []byte("id,score\nx,0.8\n")},
		{Index: 2, Data: []byte("id,score\nz,0.05\n")},
	}
	m, err := NewMerger("score", domain.Desc, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range outputs {
		if err := m.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	var looked []int
	err = m.Join("id", []string{"smiles"}, func(chunk int, ids []string) (map[string][]string, error) {
		looked = append(looked, chunk)
		return LookupColumns(strings.NewReader(inputs[chunk]), "id", []string{"smiles"}, ids)
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := m.Finish(&b); err != nil {
		t.Fatal(err)
	}
	if want := "id,score,smiles\nx,0.9,C\nx,0.8,\"N,N\"\n"; b.String() != want {
		t.Errorf("final CSV:\n%s\nwant:\n%s", b.String(), want)
	}
	if !slices.Equal(looked, []int{0, 1}) {
		t.Errorf("looked up chunks %v, want [0 1]", looked)
	}

	m, _ = NewMerger("score", domain.Desc, 5)
	if err := m.Add(outputs[0]); err != nil {
		t.Fatal(err)
	}
	err = m.Join("id", []string{"smiles"}, func(int, []string) (map[string][]string, error) {
		return nil, fmt.Errorf("no input")
	})
	if err == nil || !strings.Contains(err.Error(), "chunk 0: no input") {
		t.Errorf("a failed lookup: err = %v, want it named with its chunk", err)
	}
	if err := m.Join("key", nil, nil); err == nil || !errors.Is(err, domain.ErrInvalidArgument) {
		t.Errorf("a missing id column: err = %v, want an invalid argument", err)
	}
}
