//go:build !race

package main

// raceBuild says the tests run with the race detector, and so build the
// binary they run with it too.
const raceBuild = false
