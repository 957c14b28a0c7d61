// Package enginetest holds what the tests of the engine and of the
// transports built on it share. It is for tests only: nothing else imports
// it.
package enginetest

import (
	"sync/atomic"
	"time"
)

// Clock is a test clock for engine.Config.Now that tests move forward
// with Advance. NewClock makes one that stands still between Advances; the
// zero Clock follows real time, shifted by its Advances, for tests that
// run the engine's loops. It is safe for concurrent use, so that one
// clock can serve several engines and the goroutines that read it.
type Clock struct {
	start  time.Time // zero: real time
	offset atomic.Int64
}

// NewClock returns a clock that reads start until Advance moves it.
func NewClock(start time.Time) *Clock { return &Clock{start: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	d := time.Duration(c.offset.Load())
	if c.start.IsZero() {
		return time.Now().Add(d)
	}
	return c.start.Add(d)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }
