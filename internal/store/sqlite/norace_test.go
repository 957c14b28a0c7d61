//go:build !race

package sqlite

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
