//go:build race

package e2e

// raceBuild says the tests run with the race detector, and so build the
// binary they run with it too.
const raceBuild = true
