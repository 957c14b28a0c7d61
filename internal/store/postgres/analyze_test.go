package postgres

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestRefreshPutOffIsNotDropped: inserts that call for a refresh within
// the interval of the last get it once the interval has passed, without
// any insert after them; one refresh pays for them all.
func TestRefreshPutOffIsNotDropped(t *testing.T) {
	t.Parallel()
	var refreshed atomic.Int32
	c := &insertCount{every: 100 * time.Millisecond, refresh: func() { refreshed.Add(1) }}
	defer c.stop()
	now := time.Now()
	if !c.add(analyzeAfter, now) {
		t.Fatal("the first inserts of analyzeAfter tasks did not call for a refresh")
	}
	for range 2 {
		if c.add(analyzeAfter, now) {
			t.Fatal("inserts within the interval called for a refresh at once")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for refreshed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a second one, which must not come
	if n := refreshed.Load(); n != 1 {
		t.Fatalf("the refresh put off ran %d times, want once", n)
	}
	// A closed store puts none off.
	c.stop()
	if c.add(analyzeAfter, c.last) || c.owed != nil {
		t.Error("a stopped count called for a refresh")
	}
}
