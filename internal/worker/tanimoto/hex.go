package tanimoto

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// hexVal maps an ASCII byte to its hex digit value, or 0xff when it is not
// a hex digit.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

// wordsFor returns the number of 64-bit words that hold a fingerprint of
// digits hex digits.
func wordsFor(digits int) int {
	return (digits + 15) / 16
}

// DecodeHex decodes the hex fingerprint src into 64-bit words and returns
// them, reusing dst's storage when it is large enough. Upper- and lower-case
// digits are accepted; len(src) must be even. Digits 2k and 2k+1 become byte
// k of the vector, and byte k is bits 8·(k mod 8) to 8·(k mod 8)+7 of word
// k/8; bits past the end of src in the last word are zero. Errors wrap
// ErrBadInput and name the first offending byte.
func DecodeHex(dst []uint64, src []byte) ([]uint64, error) {
	if len(src)%2 != 0 {
		return dst[:0], fmt.Errorf("%w: %s", ErrBadInput, hexProblem(src))
	}
	n := wordsFor(len(src))
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	if !decodeHex(dst, src) {
		return dst[:0], fmt.Errorf("%w: %s", ErrBadInput, hexProblem(src))
	}
	return dst, nil
}

// hexProblem says why src is not a hex fingerprint: its odd length, or its
// first byte that is not a hex digit.
func hexProblem(src []byte) string {
	for i, c := range src {
		if hexVal[c] == 0xff {
			return fmt.Sprintf("byte %d is %q, not a hex digit", i+1, c)
		}
	}
	if len(src)%2 != 0 {
		return fmt.Sprintf("%d hex digits are not a whole number of bytes", len(src))
	}
	return "not hex"
}

// pairVal maps two ASCII bytes, loaded little-endian as one uint16, to the
// byte their hex digits spell, or to 0x100 when either is not a hex digit.
// Decoding a digit pair is then one load from a table whose used entries
// fit in a few KiB, about twice as fast as decoding eight digits at once
// with arithmetic in a uint64. It is built on first use, so that programs
// that never decode do not pay for its 128 KiB.
var pairVal = sync.OnceValue(func() *[1 << 16]uint16 {
	t := new([1 << 16]uint16)
	for i := range t {
		hi, lo := hexVal[i&0xff], hexVal[i>>8]
		if hi == 0xff || lo == 0xff {
			t[i] = 0x100
		} else {
			t[i] = uint16(hi)<<4 | uint16(lo)
		}
	}
	return t
})

// decodeHex decodes the even-length src into dst, which must have exactly
// wordsFor(len(src)) words, and reports whether src was all hex digits. dst
// is garbage when it reports false.
func decodeHex(dst []uint64, src []byte) bool {
	t := pairVal()
	full := len(src) / 16
	var bad uint16
	for i := range full {
		s := src[i*16 : i*16+16 : i*16+16]
		x, y := binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:])
		b0, b1, b2, b3 := t[uint16(x)], t[uint16(x>>16)], t[uint16(x>>32)], t[uint16(x>>48)]
		b4, b5, b6, b7 := t[uint16(y)], t[uint16(y>>16)], t[uint16(y>>32)], t[uint16(y>>48)]
		bad |= b0 | b1 | b2 | b3 | b4 | b5 | b6 | b7
		dst[i] = uint64(b0) | uint64(b1)<<8 | uint64(b2)<<16 | uint64(b3)<<24 |
			uint64(b4)<<32 | uint64(b5)<<40 | uint64(b6)<<48 | uint64(b7)<<56
	}
	if tail := src[full*16:]; len(tail) > 0 {
		var w uint64
		for k := 0; k+1 < len(tail); k += 2 {
			b := t[uint16(tail[k])|uint16(tail[k+1])<<8]
			bad |= b
			w |= uint64(b) << (4 * k)
		}
		dst[full] = w
	}
	return bad&0x100 == 0
}
