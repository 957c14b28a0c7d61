package table

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchSize is the size of the generated benchmark tables.
const benchSize = 16 << 20

var smiles = []string{
	"CC(=O)Oc1ccccc1C(=O)O", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C", "C1=CC=C(C=C1)C=O",
	"CC(C)Cc1ccc(cc1)[C@@H](C)C(=O)O", "O=C(O)c1ccccc1O", "c1ccc2c(c1)ccc1ccccc12",
}

var names = []string{"aspirin", "caffeine, anhydrous", "benzaldehyde", `ibuprofen "racemic"`, "salicylic acid", "phenanthrene"}

// benchTable generates about benchSize bytes of a compound table.
//
//   - canonical: as Normalize writes it, no quotes at all; the common case.
//   - quoted-canonical: as Normalize writes it, a third of the names quoted
//     because they hold commas or quotes.
//   - quoted-all: every field quoted, needed or not, CRLF line ends; every
//     record is rewritten.
func benchTable(kind string) []byte {
	r := rand.New(rand.NewPCG(9, 10))
	var b bytes.Buffer
	b.Grow(benchSize + 1024)
	w := csv.NewWriter(&b)
	w.UseCRLF = kind == "quoted-all"
	rec := []string{"id", "smiles", "name", "mw", "logp", "score"}
	for i := 0; b.Len() < benchSize; i++ {
		if i > 0 {
			rec = []string{
				fmt.Sprintf("CHEMBL%d", 1000+i),
				smiles[r.IntN(len(smiles))],
				"compound",
				fmt.Sprintf("%.2f", 100+r.Float64()*400),
				fmt.Sprintf("%.3f", r.Float64()*6-1),
				fmt.Sprintf("%.4f", r.Float64()),
			}
			if kind != "canonical" {
				rec[2] = names[r.IntN(len(names))]
			}
		}
		if kind == "quoted-all" {
			w.Flush()
			for j, f := range rec {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`"` + string(bytes.ReplaceAll([]byte(f), []byte(`"`), []byte(`""`))) + `"`)
			}
			b.WriteString("\r\n")
			continue
		}
		if err := w.Write(rec); err != nil {
			panic(err)
		}
		w.Flush()
	}
	return b.Bytes()
}

var benchKinds = []string{"canonical", "quoted-canonical", "quoted-all"}

func BenchmarkNormalize(b *testing.B) {
	for _, kind := range benchKinds {
		in := benchTable(kind)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := Normalize(io.Discard, bytes.NewReader(in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNormalizeEncodingCSV is the baseline: the same work done with
// encoding/csv's Reader and Writer.
func BenchmarkNormalizeEncodingCSV(b *testing.B) {
	for _, kind := range benchKinds {
		in := benchTable(kind)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r := csv.NewReader(bytes.NewReader(in))
				r.ReuseRecord = true
				w := csv.NewWriter(io.Discard)
				for {
					rec, err := r.Read()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Write(rec); err != nil {
						b.Fatal(err)
					}
				}
				w.Flush()
			}
		})
	}
}

// BenchmarkNormalizeFile normalizes a table file in the page cache, and
// BenchmarkReadFile only reads it, the bound that Normalize is held to.
func BenchmarkNormalizeFile(b *testing.B) {
	path := benchFile(b)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Normalize(io.Discard, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func BenchmarkReadFile(b *testing.B) {
	path := benchFile(b)
	buf := make([]byte, normalizeBufSize)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := f.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}

func benchFile(b *testing.B) string {
	in := benchTable("canonical")
	path := filepath.Join(b.TempDir(), "table.csv")
	if err := os.WriteFile(path, in, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	return path
}

func BenchmarkSplit(b *testing.B) {
	for _, kind := range benchKinds[:2] {
		in := benchTable(kind)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := Split(bytes.NewReader(in), true, 10_000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSHA256 is the bound of Split, which hashes every byte.
func BenchmarkSHA256(b *testing.B) {
	in := benchTable("canonical")
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		sha256.Sum256(in)
	}
}
