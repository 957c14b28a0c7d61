//go:build !race

package engine_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
