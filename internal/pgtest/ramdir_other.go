//go:build !linux

package pgtest

// ramDir returns "", the default temporary directory: only Linux has a RAM
// disk at a known place.
func ramDir() string { return "" }
