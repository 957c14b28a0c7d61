// Package demo is `scimesh demo`: Run starts a coordinator and workers in
// one process, submits a similarity search over a data set of random
// fingerprints (WriteFingerprints), and checks its result against the same
// search computed in one process without the queue (DirectTopK).
package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"

	"github.com/scimesh/scimesh/internal/worker/tanimoto"
)

// Data describes a data set of random fingerprints.
type Data struct {
	Rows    int     // fingerprints
	Bits    int     // bits of each, a multiple of 8
	Density float64 // share of bits set, in (0, 1)
	Seed    uint64  // of the random numbers
}

// WriteFingerprints writes d.Rows random fingerprints to path as the CSV
// id,fingerprint (ids mol-0, mol-1, …; fingerprints in hex) and returns a
// query, in hex, near one of them: a few of its bits flipped, so that the
// nearest is near, not equal. The same d writes the same file.
func WriteFingerprints(path string, d Data) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(d.Seed, d.Seed^0x5c1e5))
	fp := make([]byte, d.Bits/8)
	var query []byte
	pick := rng.IntN(d.Rows)
	line := make([]byte, 0, 32+2*len(fp))
	w.WriteString("id,fingerprint\n")
	for i := range d.Rows {
		randomFingerprint(rng, fp, d.Density)
		if i == pick {
			query = slices.Clone(fp)
			for range max(1, d.Bits/256) { // flip a few bits: the nearest is near, not equal
				b := rng.IntN(d.Bits)
				query[b/8] ^= 1 << (b % 8)
			}
		}
		line = append(line[:0], "mol-"...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, ',')
		line = hex.AppendEncode(line, fp)
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(query), f.Close()
}

// randomFingerprint sets density of fp's bits, at random (a bit may be
// drawn twice).
func randomFingerprint(rng *rand.Rand, fp []byte, density float64) {
	clear(fp)
	bits := len(fp) * 8
	for range int(density * float64(bits)) {
		b := rng.IntN(bits)
		fp[b/8] |= 1 << (b % 8)
	}
}

// DirectTopK scores the whole table at path with the built-in tanimoto
// workload in this process and keeps the best k rows, higher scores first
// and ties in row order: byte for byte what the distributed job must
// produce. params is the job's parameters, holding the query.
func DirectTopK(ctx context.Context, path string, params json.RawMessage, k int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var scored bytes.Buffer
	if err := tanimoto.Run(ctx, params, true, bufio.NewReaderSize(f, 1<<20), &scored); err != nil {
		return nil, err
	}
	r := csv.NewReader(&scored)
	recs, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("no output")
	}
	header, rows := recs[0], recs[1:]
	scores := make([]float64, len(rows))
	for i, rec := range rows {
		if scores[i], err = strconv.ParseFloat(rec[1], 64); err != nil {
			return nil, err
		}
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	cw.Write(header)
	for _, i := range idx[:min(k, len(idx))] {
		cw.Write(rows[i])
	}
	cw.Flush()
	return out.Bytes(), cw.Error()
}
