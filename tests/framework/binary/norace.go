//go:build !race

package binary

// Race says the tests run with the race detector, so that Build builds the
// binaries they run with it too.
const Race = false
