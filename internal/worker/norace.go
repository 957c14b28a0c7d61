//go:build !race

package worker

// raceEnabled reports whether the binary was built with the race detector.
const raceEnabled = false
