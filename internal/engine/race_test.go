//go:build race

package engine_test

// raceEnabled reports whether the race detector is on; it slows SQLite, a
// transpiled C library, about a hundredfold, and inflates the heap.
const raceEnabled = true
