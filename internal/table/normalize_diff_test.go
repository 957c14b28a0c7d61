package table

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// fieldTokens make up field contents: plain text, every byte encoding/csv
// treats specially, the spaces its writer quotes a field for, and marks.
var fieldTokens = []string{
	"a", "bc", "1.5", "x y", ",", `"`, "\r", "\n", "\r\n", "\r\r\n", " ", "\t", "\v", "\f",
	`\.`, `\`, ".", bom, "é", "\u00a0", "\u3000", "\u0085", "\u2028", "\xe3\x80", "\xff", "",
}

// soupTokens make up inputs with no structure at all.
var soupTokens = append([]string{`""`, `","`, "\"\n", ",\n", "\n\n"}, fieldTokens...)

func genContent(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(4) {
		if r.IntN(3) == 0 {
			b.WriteString(fieldTokens[r.IntN(len(fieldTokens))])
		} else {
			b.WriteString(fieldTokens[r.IntN(4)]) // mostly plain
		}
	}
	return b.String()
}

// genTable writes a table of random records, quoted in random ways, with
// random line ends. One table in four is messy: some fields are written as
// they are, valid or not, some records are ragged, and some line ends are
// "\r\r\n", which the reader takes as a CR in the last field.
func genTable(r *rand.Rand, maxRecords int) []byte {
	var b bytes.Buffer
	for r.IntN(4) == 0 {
		b.WriteString(bom)
	}
	messy := r.IntN(4) == 0
	chance := func(n int) bool { return messy && r.IntN(n) == 0 }
	ends := []string{"\n", "\n", "\n", "\r\n"}
	width := 1 + r.IntN(4)
	n := r.IntN(maxRecords + 1)
	for i := range n {
		if r.IntN(8) == 0 {
			b.WriteString([]string{"\n", "\r\n"}[r.IntN(2)])
		}
		w := width
		if chance(20) {
			w = 1 + r.IntN(5)
		}
		for f := range w {
			if f > 0 {
				b.WriteByte(',')
			}
			c := genContent(r)
			switch {
			case chance(20):
				b.WriteString(c)
			case r.IntN(3) == 0:
				b.WriteString(`"` + strings.ReplaceAll(c, `"`, `""`) + `"`)
			case needsQuotes([]byte(c)):
				b.WriteString(`"` + strings.ReplaceAll(c, `"`, `""`) + `"`)
			default:
				b.WriteString(c)
			}
		}
		switch {
		case chance(20):
			b.WriteString("\r\r\n")
		case i < n-1:
			b.WriteString(ends[r.IntN(len(ends))])
		case r.IntN(3) > 0:
			b.WriteString([]string{"\n", "\r\n", "\r"}[r.IntN(3)])
		}
	}
	return b.Bytes()
}

func genSoup(r *rand.Rand) []byte {
	var b bytes.Buffer
	for range r.IntN(24) {
		b.WriteString(soupTokens[r.IntN(len(soupTokens))])
	}
	return b.Bytes()
}

func TestNormalizeMatchesEncodingCSV(t *testing.T) {
	t.Parallel()
	cases := 4000
	if testing.Short() {
		cases = 500
	}
	r := rand.New(rand.NewPCG(1, 2))
	valid := 0
	for i := range cases {
		var in []byte
		switch i % 3 {
		case 0:
			in = genSoup(r)
		case 1:
			in = genTable(r, 6)
		default:
			in = genTable(r, 60)
		}
		if _, rows, fault := reference(in); fault == nil && rows > 0 {
			valid++
		}
		checkNormalize(t, in, normalizeBufSize, 0)
		checkNormalize(t, in, 1+r.IntN(24), r.IntN(len(readers)))
	}
	// Make sure the generators exercise both sides.
	if valid < cases/3 || valid > cases*9/10 {
		t.Errorf("%d of %d generated inputs are valid tables; want a mix", valid, cases)
	}
}

// normalizeSeeds cover each rule of Normalize once.
var normalizeSeeds = []string{
	"",
	"\n\r\n",
	"\ufeff",
	"id,score\na,1\n",
	"id,score\r\na,1\r\nb,2",
	"id,score\na,1\r",
	"\ufeff\ufeff\"\ufeffid\",x\n1,2\n",
	"\n\ufeffid\n1\n",
	"note\n\"a,b\"\n\"say \"\"hi\"\"\"\n\"multi\nline\"\n\"x\r\r\ny\"\n",
	"a,b\n\"q\",\"\"\n\" lead\",\\.\n\"\\.\",\t\n\u00a0x,\u3000\n",
	"a\n\"\"\n\n\"\"",
	"a,b\nx\ry,z\r\r\n",
	"a,b\n1,2,3\n",
	"a,b\n1\n",
	"a,b\nx\"y,1\n",
	"a,b\n\"x\"y,1\n",
	"a,b\n\"x\n,1\n",
	"a,b\n\"x\ny\",\"z\n",
	"a,b\n\"x\ny\",z\"\n",
	"\"a\"\"",
	"\"a\"\r\r\n",
}

func FuzzNormalize(f *testing.F) {
	for i, s := range normalizeSeeds {
		f.Add([]byte(s), uint8(i))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		f.Add(genTable(r, 8), uint8(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, window uint8) {
		checkNormalize(t, in, normalizeBufSize, 0)
		checkNormalize(t, in, 1+int(window)%32, int(window)/32%len(readers))
	})
}
