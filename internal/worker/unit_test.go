package worker

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/table"
)

// TestTopKMatchesSort checks the bounded heap against sorting all rows,
// over outputs full of ties, in both orders and for k below, at and above
// the row count.
func TestTopKMatchesSort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		n := rng.IntN(60)
		k := 1 + rng.IntN(70)
		order := []string{"desc", "asc"}[round%2]
		type row struct {
			score float64
			seq   int
		}
		var rows []row
		var in strings.Builder
		in.WriteString("name,score\n")
		for i := range n {
			s := float64(rng.IntN(8)) / 2
			if rng.IntN(10) == 0 {
				s = -s // -0 ties with 0
			}
			rows = append(rows, row{s, i})
			fmt.Fprintf(&in, "r%d,%s\n", i, strconv.FormatFloat(s, 'g', -1, 64))
		}
		tk, err := newTopK("score", order, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.read(strings.NewReader(in.String())); err != nil {
			t.Fatalf("read: %v", err)
		}
		got, err := tk.csv()
		if err != nil {
			t.Fatal(err)
		}
		slices.SortStableFunc(rows, func(a, b row) int {
			if order == "desc" {
				return cmp.Compare(b.score, a.score)
			}
			return cmp.Compare(a.score, b.score)
		})
		var want bytes.Buffer
		w := csv.NewWriter(&want)
		_ = w.Write([]string{"name", "score"})
		for _, r := range rows[:min(k, n)] {
			_ = w.Write([]string{"r" + strconv.Itoa(r.seq), strconv.FormatFloat(r.score, 'g', -1, 64)})
		}
		w.Flush()
		if string(got) != want.String() {
			t.Fatalf("round %d (n %d, k %d, %s):\n got %q\nwant %q", round, n, k, order, got, want.String())
		}
	}
}

func TestTopKOutputRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want, err string
	}{
		{"bom and quoting", "\ufeff\"id\",\"score\"\r\n\"a,b\",1\r\n\"x\r\r\ny\",2\r\n", "id,score\n\"x\ny\",2\n\"a,b\",1\n", ""},
		{"header only", "id,score\n", "id,score\n", ""},
		{"exponent and sign", "id,score\na,-1e-3\nb,+2\nc,0x1p-2\n", "id,score\nb,+2\nc,0x1p-2\n", ""},
		{"empty", "", "", "output is empty"},
		{"no score column", "id,value\na,1\n", "", `no column "score"`},
		{"score twice", "score,score\n1,2\n", "", "twice (columns 1 and 2)"},
		{"infinite", "id,score\na,1\nb,+Inf\n", "", `output line 3: score "+Inf"`},
		{"spaces", "id,score\na, 1\n", "", `score " 1"`},
		{"empty score", "id,score\na,\n", "", `score ""`},
		{"short record", "id,score\na\n", "", "output line 2"},
		{"bare quote", "id,score\na\"b,1\n", "", "output line 2, column 2"},
		{"open quote", "id,score\n\"a,1\n", "", "not closed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk, err := newTopK("score", "desc", 2)
			if err != nil {
				t.Fatal(err)
			}
			err = tk.read(strings.NewReader(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("read(%q): error %v, want one saying %q", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read(%q): %v", c.in, err)
			}
			got, err := tk.csv()
			if err != nil || string(got) != c.want {
				t.Fatalf("read(%q): kept %q (%v), want %q", c.in, got, err, c.want)
			}
			// The coordinator accepts what the worker keeps.
			if _, err := table.ParseOutput(got, "score", 2); err != nil {
				t.Fatalf("the coordinator would refuse %q: %v", got, err)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var lines []string
	w := &lineWriter{emit: func(s string) { lines = append(lines, s) }}
	long := strings.Repeat("x", maxLineBytes+10)
	for _, p := range []string{"one\r\ntw", "o\n", "\n", long[:100], long[100:] + "\nlast"} {
		_, _ = w.Write([]byte(p))
	}
	w.flush()
	want := []string{"one", "two", "", long[:maxLineBytes] + " […line cut at 8 KiB]", "last"}
	if !slices.Equal(lines, want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	for i := range 30 {
		_, _ = fmt.Fprintf(w, "l%d\n", i)
	}
	tail := w.lastLines()
	if len(tail) != tailLines || tail[0] != "l10" || tail[len(tail)-1] != "l29" {
		t.Fatalf("last lines %q, want l10…l29", tail)
	}
}

func TestSafeName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"s0:01a2-0": "s0:01a2-0",
		"..":        "_..",
		".":         "_.",
		"":          "_",
		"../etc":    ".._etc",
		"a/b\x00c":  "a_b_c",
	} {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseWorkload(t *testing.T) {
	t.Parallel()
	wl, err := ParseWorkload("dock=/opt/dock --x=1")
	if err != nil || wl.Name != "dock" || wl.Command != "/opt/dock --x=1" || wl.Run != nil {
		t.Fatalf("ParseWorkload(dock=…) = %+v, %v", wl, err)
	}
	wl, err = ParseWorkload("tanimoto")
	if err != nil || wl.Name != "tanimoto" || wl.Command != "" || wl.Run == nil {
		t.Fatalf("ParseWorkload(tanimoto) = %+v, %v", wl, err)
	}
	for spec, want := range map[string]string{
		"nosuch":      "not a built-in (built-ins: tanimoto)",
		"x=":          "empty command",
		"bad name=ls": "the name must be",
		"=ls":         "the name must be",
	} {
		if _, err := ParseWorkload(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWorkload(%q): error %v, want one saying %q", spec, err, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := backoff{min: 100 * time.Millisecond, max: 800 * time.Millisecond}
	for i, ceiling := range []time.Duration{100, 200, 400, 800, 800} {
		ceiling *= time.Millisecond
		d := b.next()
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("wait %d is %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
		}
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}
