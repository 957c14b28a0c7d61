package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFingerprints: the data set has the rows and bits asked for, the
// same seed writes the same file and another seed another, and the query
// is near one of the fingerprints but equal to none.
func TestWriteFingerprints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := Data{Rows: 500, Bits: 512, Density: 0.05, Seed: 7}
	write := func(name string, d Data) ([]byte, string) {
		t.Helper()
		path := filepath.Join(dir, name)
		q, err := WriteFingerprints(path, d)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b, q
	}
	a, qa := write("a.csv", d)
	b, qb := write("b.csv", d)
	if !bytes.Equal(a, b) || qa != qb {
		t.Fatal("the same Data wrote two different data sets")
	}
	d.Seed = 8
	if c, _ := write("c.csv", d); bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 wrote the same data set")
	}
	lines := strings.Split(strings.TrimSuffix(string(a), "\n"), "\n")
	if len(lines) != 501 || lines[0] != "id,fingerprint" || !strings.HasPrefix(lines[1], "mol-0,") {
		t.Fatalf("%d lines starting %q, %q; want a header and 500 rows from mol-0", len(lines), lines[0], lines[1])
	}
	if len(qa) != 512/4 {
		t.Fatalf("query of %d hex digits, want %d", len(qa), 512/4)
	}
	nearest := 512
	for _, l := range lines[1:] {
		_, fp, _ := strings.Cut(l, ",")
		if len(fp) != len(qa) {
			t.Fatalf("row %q: %d hex digits, want %d", l, len(fp), len(qa))
		}
		nearest = min(nearest, hexDistance(t, fp, qa))
	}
	if nearest < 1 || nearest > 2 { // 512/256 bits flipped, perhaps the same twice
		t.Errorf("the query is %d bits from its nearest fingerprint, want 1 or 2", nearest)
	}
}

func hexDistance(t *testing.T, a, b string) int {
	t.Helper()
	n := 0
	for i := range len(a) {
		x, y := strings.IndexByte("0123456789abcdef", a[i]), strings.IndexByte("0123456789abcdef", b[i])
		if x < 0 || y < 0 {
			t.Fatalf("not lowercase hex: %q, %q", a, b)
		}
		n += bits.OnesCount8(uint8(x ^ y))
	}
	return n
}

// TestDirectTopK: the best k rows by Tanimoto similarity to the query,
// ties in row order, as CSV with the workload's header.
func TestDirectTopK(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "t.csv")
	// Against the query ff: 1, 0.5, 0.5, 0.125, 0.
	table := "id,fingerprint\nd,01\nb,0f\nnone,00\na,ff\nc,f0\n"
	if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]string{"query": "ff"})
	for _, c := range []struct {
		k    int
		want string
	}{
		{1, "id,score\na,1\n"},
		{3, "id,score\na,1\nb,0.5\nc,0.5\n"},
		{9, "id,score\na,1\nb,0.5\nc,0.5\nd,0.125\nnone,0\n"},
	} {
		got, err := DirectTopK(context.Background(), path, params, c.k)
		if err != nil || string(got) != c.want {
			t.Errorf("top %d: %q, %v; want %q", c.k, got, err, c.want)
		}
	}
}

func TestRandomFingerprint(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	fp := make([]byte, 256)
	for _, density := range []float64{0.01, 0.03, 0.3} {
		randomFingerprint(rng, fp, density)
		set := 0
		for _, b := range fp {
			set += bits.OnesCount8(b)
		}
		if want := int(density * 2048); set > want || set < want*8/10 {
			t.Errorf("density %v: %d of 2048 bits set, want at most %d and not much fewer", density, set, want)
		}
	}
}
