package tanimoto

import (
	"encoding/hex"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomHex returns a random fingerprint of digits hex digits in which each
// bit is set with probability density.
func randomHex(rng *rand.Rand, digits int, density float64) string {
	b := make([]byte, digits/2)
	if density == 0.5 {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for i := range b {
		if density == 0.5 {
			break
		}
		for bit := range 8 {
			if rng.Float64() < density {
				b[i] |= 1 << bit
			}
		}
	}
	s := hex.EncodeToString(b)
	if rng.IntN(2) == 0 {
		s = strings.ToUpper(s)
	}
	return s
}

// reference computes the Tanimoto similarity of two hex fingerprints bit by
// bit, and the quotient exactly, rounded once to float64.
func reference(t testing.TB, a, b string) float64 {
	t.Helper()
	x, err := hex.DecodeString(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := hex.DecodeString(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != len(y) {
		t.Fatalf("reference: lengths %d and %d differ", len(x), len(y))
	}
	var and, or int64
	for i := range x {
		for bit := range 8 {
			p, q := x[i]>>bit&1, y[i]>>bit&1
			and += int64(p & q)
			or += int64(p | q)
		}
	}
	if or == 0 {
		return 0
	}
	f, _ := new(big.Rat).SetFrac64(and, or).Float64()
	return f
}

func mustWords(t testing.TB, s string) []uint64 {
	t.Helper()
	w, err := DecodeHex(nil, []byte(s))
	if err != nil {
		t.Fatalf("DecodeHex(%q): %v", s, err)
	}
	return w
}

func TestSimilarityKnown(t *testing.T) {
	t.Parallel()
	r := strings.Repeat
	tests := []struct {
		name string
		a, b string
		want float64
	}{
		{"both empty", r("0", 512), r("0", 512), 0},
		{"one empty", r("0", 512), r("f", 512), 0},
		{"identical 2048", r("a5", 256), r("A5", 256), 1},
		{"identical full", r("f", 512), r("F", 512), 1},
		{"disjoint 2048", r("aa", 256), r("55", 256), 0},
		{"half 2048", r("ff", 256), r("0f", 256), 0.5},
		{"one bit of 2048", "01" + r("0", 510), r("f", 512), 1.0 / 2048},
		{"1024 bits a third", r("03", 128), r("06", 128), 1.0 / 3},
		{"1024 bits two thirds", r("07", 128), r("03", 128), 2.0 / 3},
		// MACCS: 166 bits padded to 168 = 42 hex digits, not a whole word.
		{"maccs identical", r("f", 40) + "3f", r("f", 40) + "3f", 1},
		{"maccs tail only", r("0", 40) + "30", r("0", 40) + "10", 0.5},
		{"maccs 1 of 166", r("0", 40) + "20", r("f", 40) + "3f", 1.0 / 166},
		{"one byte", "ff", "0f", 0.5},
		{"one byte empty", "00", "00", 0},
		{"9 bytes crosses a word", "ff" + r("0", 14) + "01", "ff" + r("0", 14) + "00", 8.0 / 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := mustWords(t, tc.a), mustWords(t, tc.b)
			if got := Similarity(a, b); got != tc.want {
				t.Errorf("Similarity(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := Similarity(b, a); got != tc.want {
				t.Errorf("Similarity(%s, %s) = %v, want %v (swapped)", tc.b, tc.a, got, tc.want)
			}
			if ref := reference(t, tc.a, tc.b); ref != tc.want {
				t.Errorf("reference(%s, %s) = %v, want %v: the test case is wrong", tc.a, tc.b, ref, tc.want)
			}
		})
	}
}

func TestSimilarityReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, digits := range []int{2, 14, 16, 18, 42, 64, 256, 512, 1024, 2050} {
		for i := range 300 {
			// Vary the density so that scores cover (0, 1], sparse
			// fingerprints like Morgan's included.
			d := []float64{0.01, 0.05, 0.2, 0.5, 0.9}[i%5]
			a, b := randomHex(rng, digits, d), randomHex(rng, digits, d)
			if i%7 == 0 {
				b = a
			}
			want := reference(t, a, b)
			if got := Similarity(mustWords(t, a), mustWords(t, b)); got != want {
				t.Fatalf("Similarity(%s, %s) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 13 {
		a, b := make([]uint64, n), make([]uint64, n)
		var wantAnd, wantOr int
		for i := range a {
			a[i], b[i] = rng.Uint64(), rng.Uint64()
			wantAnd += bits.OnesCount64(a[i] & b[i])
			wantOr += bits.OnesCount64(a[i] | b[i])
		}
		and, or := counts(a, b)
		if and != wantAnd || or != wantOr {
			t.Errorf("Counts over %d words = %d, %d; want %d, %d", n, and, or, wantAnd, wantOr)
		}
	}
}
