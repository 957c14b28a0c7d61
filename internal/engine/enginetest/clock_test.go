package enginetest

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("Now after 10 Advances of 1s = %v, want %v", got, want)
	}

	var real Clock
	before := time.Now()
	real.Advance(time.Hour)
	if got := real.Now(); got.Before(before.Add(time.Hour)) || got.After(time.Now().Add(time.Hour)) {
		t.Fatalf("a real clock advanced by an hour reads %v; want an hour after now (%v)", got, before)
	}
}
