//go:build !linux

package pgcluster

// RAMDir returns "", the default temporary directory: only Linux has a RAM
// disk at a known place.
func RAMDir() string { return "" }
