package tanimoto

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// wantWords decodes s with encoding/hex and lays the bytes out as DecodeHex
// documents: byte k in bits 8·(k mod 8) of word k/8.
func wantWords(t testing.TB, s string) []uint64 {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	padded := make([]byte, wordsFor(len(s))*8)
	copy(padded, b)
	w := make([]uint64, len(padded)/8)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(padded[i*8:])
	}
	return w
}

func TestDecodeHexMatchesEncodingHex(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	var buf []uint64
	for digits := 0; digits <= 80; digits += 2 {
		for range 50 {
			s := randomHex(rng, digits, 0.5)
			var err error
			buf, err = DecodeHex(buf, []byte(s))
			if err != nil {
				t.Fatalf("DecodeHex(%q): %v", s, err)
			}
			want := wantWords(t, s)
			if len(buf) != len(want) {
				t.Fatalf("DecodeHex(%q) has %d words, want %d", s, len(buf), len(want))
			}
			for i := range want {
				if buf[i] != want[i] {
					t.Fatalf("DecodeHex(%q) word %d = %#x, want %#x", s, i, buf[i], want[i])
				}
			}
		}
	}
}

func TestDecodeHexEveryDigitPair(t *testing.T) {
	t.Parallel()
	const digits = "0123456789abcdefABCDEF"
	for _, hi := range digits {
		for _, lo := range digits {
			// Put the pair at every position of two words, the tail too.
			for pos := 0; pos < 34; pos += 2 {
				s := []byte(strings.Repeat("0", 34))
				s[pos], s[pos+1] = byte(hi), byte(lo)
				got, err := DecodeHex(nil, s)
				if err != nil {
					t.Fatalf("DecodeHex(%q): %v", s, err)
				}
				want := wantWords(t, string(s))
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("DecodeHex(%q) word %d = %#x, want %#x", s, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestDecodeHexRejects(t *testing.T) {
	t.Parallel()
	// Every byte that is not a hex digit, at every position of a word and
	// of the tail, is refused and named.
	for c := range 256 {
		if hexVal[c] != 0xff {
			continue
		}
		for pos := range 20 {
			s := []byte(strings.Repeat("a", 20))
			s[pos] = byte(c)
			_, err := DecodeHex(nil, s)
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("DecodeHex(%q) error = %v, want ErrBadInput", s, err)
			}
			if want := "byte " + strconv.Itoa(pos+1) + " is"; !strings.Contains(err.Error(), want) {
				t.Fatalf("DecodeHex(%q) error = %q, want it to contain %q", s, err, want)
			}
		}
	}
	if _, err := DecodeHex(nil, []byte("abc")); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "whole number of bytes") {
		t.Errorf("DecodeHex(abc) error = %v, want an odd-length ErrBadInput", err)
	}
}

func TestDecodeHexReusesDst(t *testing.T) {
	// Not parallel: AllocsPerRun refuses to run alongside other tests.
	dst := make([]uint64, 0, 32)
	got, err := DecodeHex(dst, []byte(strings.Repeat("f", 512)))
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &dst[:1][0] {
		t.Error("DecodeHex allocated although dst had the capacity")
	}
	src := []byte("00ff")
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeHex(dst, src) }); n != 0 {
		t.Errorf("DecodeHex allocates %v times a call, want 0", n)
	}
}
