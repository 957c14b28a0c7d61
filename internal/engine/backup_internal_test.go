package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// slowCounts answers TaskCountByJob slowly, with a pending chunk (so the
// median is 0 at once after it), and counts the calls.
type slowCounts struct {
	store.Store
	n atomic.Int64
}

func (s *slowCounts) TaskCountByJob(_ context.Context, jobs []string) (map[string]domain.TaskCounts, error) {
	s.n.Add(1)
	time.Sleep(50 * time.Millisecond)
	return map[string]domain.TaskCounts{jobs[0]: {Total: 10, Pending: 1}}, nil
}

// TestChunkTimesReadOnce: claimers asking for a job's median together
// read it from the store once a second, not once each.
func TestChunkTimesReadOnce(t *testing.T) {
	t.Parallel()
	var c chunkTimes
	s := &slowCounts{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if m, err := c.median(t.Context(), s, "s0:j", now); err != nil || m != 0 {
				t.Errorf("median: %v, %v; want 0 (a chunk is pending)", m, err)
			}
		})
	}
	wg.Wait()
	if n := s.n.Load(); n != 1 {
		t.Errorf("%d reads by 8 claimers at once, want 1", n)
	}
	if _, err := c.median(t.Context(), s, "s0:j", now.Add(chunkTimesFresh)); err != nil || s.n.Load() != 2 {
		t.Errorf("a second later: %d reads, %v; want a second read", s.n.Load(), err)
	}
}
