//go:build race

package sqlite

// raceEnabled reports whether the race detector is on; it slows SQLite, a
// transpiled C library, about a hundredfold.
const raceEnabled = true
