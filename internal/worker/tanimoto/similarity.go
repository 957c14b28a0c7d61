package tanimoto

import "math/bits"

// Similarity returns the Tanimoto similarity of the bit vectors a and b,
// |a∧b| / |a∨b|, or 0 when both are empty. a and b must have the same
// length; Similarity panics when b is shorter than a.
func Similarity(a, b []uint64) float64 {
	and, or := counts(a, b)
	if or == 0 {
		return 0
	}
	return float64(and) / float64(or)
}

// counts returns the number of bits set in both a and b, and in either. a
// and b must have the same length; counts panics when b is shorter than a.
func counts(a, b []uint64) (and, or int) {
	b = b[:len(a)]
	i := 0
	// Four words a round: independent adds let the popcounts overlap.
	var a0, a1, o0, o1 int
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		a0 += bits.OnesCount64(x[0]&y[0]) + bits.OnesCount64(x[2]&y[2])
		a1 += bits.OnesCount64(x[1]&y[1]) + bits.OnesCount64(x[3]&y[3])
		o0 += bits.OnesCount64(x[0]|y[0]) + bits.OnesCount64(x[2]|y[2])
		o1 += bits.OnesCount64(x[1]|y[1]) + bits.OnesCount64(x[3]|y[3])
	}
	for ; i < len(a); i++ {
		a0 += bits.OnesCount64(a[i] & b[i])
		o0 += bits.OnesCount64(a[i] | b[i])
	}
	return a0 + a1, o0 + o1
}
