package tanimoto

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchChunk returns a chunk with a header and rows random fingerprints of
// digits hex digits, and a query of the same length.
func benchChunk(rows, digits int) (chunk []byte, query string) {
	rng := rand.New(rand.NewPCG(42, 2048))
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"id", "fingerprint"})
	for i := range rows {
		_ = w.Write([]string{"MOL" + strconv.Itoa(i), randomHex(rng, digits, 0.5)})
	}
	w.Flush()
	return buf.Bytes(), randomHex(rng, digits, 0.5)
}

func BenchmarkSimilarity(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := make([]uint64, 32), make([]uint64, 32) // 2048 bits
	for i := range x {
		x[i], y[i] = rng.Uint64(), rng.Uint64()
	}
	var sink float64
	for b.Loop() {
		sink += Similarity(x, y)
	}
	_ = sink
}

func BenchmarkDecodeHex(b *testing.B) {
	src := []byte(randomHex(rand.New(rand.NewPCG(1, 1)), 512, 0.5))
	dst := make([]uint64, 32)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if !decodeHex(dst, src) {
			b.Fatal("not hex")
		}
	}
}

func BenchmarkRun(b *testing.B) {
	const rows = 10_000
	chunk, query := benchChunk(rows, 512)
	p := params(query)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Run(context.Background(), p, true, bytes.NewReader(chunk), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "fps")
}
