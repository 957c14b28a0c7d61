package table

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

// TestPartial offers chunks in a random order, each several times, and
// checks after every step that the best rows, all or the first few, are
// Merge's over the chunks offered so far; Join on its Merger leaves the
// Partial as it was.
func TestPartial(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	const n, topK = 40, 7
	chunks := make([]ChunkOutput, n)
	for i := range chunks {
		var b bytes.Buffer
		b.WriteString("id,score\n")
		for r := range rng.IntN(6) {
			fmt.Fprintf(&b, "c%d-%d,%d\n", i, r, rng.IntN(9)) // many ties
		}
		chunks[i] = ChunkOutput{Index: i, Data: b.Bytes()}
	}
	p, err := NewPartial("score", domain.Desc, topK)
	if err != nil {
		t.Fatal(err)
	}
	var added []ChunkOutput
	in := map[int]bool{}
	for step := range 3 * n {
		c := chunks[rng.IntN(n)]
		if err := p.Add(c); err != nil {
			t.Fatal(err)
		}
		if !in[c.Index] {
			in[c.Index] = true
			added = append(added, c)
		}
		if p.Chunks() != len(added) {
			t.Fatalf("step %d: Chunks() = %d, want %d", step, p.Chunks(), len(added))
		}
		for _, rows := range []int{0, 3} {
			var want, got bytes.Buffer
			k := topK
			if rows > 0 {
				k = rows
			}
			if _, err := Merge(&want, added, "score", domain.Desc, k); err != nil {
				t.Fatal(err)
			}
			m := p.Merger(rows)
			if err := m.Join("id", []string{"x"}, func(int, []string) (map[string][]string, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			m = p.Merger(rows) // Join above changed its own copy only
			if _, err := m.Finish(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Fatalf("step %d, rows %d: got\n%s\nwant\n%s", step, rows, got.String(), want.String())
			}
		}
	}
}
