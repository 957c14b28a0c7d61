package main

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{999.4, "999"},
		{1000, "1,000"},
		{32900.4, "32,900"},
		{1234567, "1,234,567"},
		{-45678, "-45,678"},
	} {
		if got := thousands(tc.in); got != tc.want {
			t.Errorf("thousands(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResultString(t *testing.T) {
	t.Parallel()
	r := result{jobs: 50000, insert: 610 * time.Millisecond, elapsed: 1520 * time.Millisecond}
	want := "50000 jobs in 1.52s = 32,895 jobs/s (workers 2000, fetch cooldown 2ms, poll 20ms; inserted in 0.61s)"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
