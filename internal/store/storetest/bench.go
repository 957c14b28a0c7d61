package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// BenchClaimSkewed measures the claims that a claim index in priority order
// alone serves badly, on s (an empty store):
//
//   - "rare-workload": a backlog of many pending tasks of workload A and
//     a few of workload B behind them; each operation claims one task for
//     workload B.
//   - "backoff": many pending tasks in backoff (run_after in the future) at
//     the head of the claim order, and runnable ones behind them; each
//     operation claims one runnable task.
//
// backlog is the number of A tasks, backoff the number of tasks in
// backoff. Run with -benchtime of at most 1000x: each operation uses up one
// of 1,000 claimable tasks.
func BenchClaimSkewed(b *testing.B, s store.Store, backlog, backoff int) {
	ctx := b.Context()
	at := Epoch()
	insert := func(id, workload string, n, priority int, created time.Time, runAfter time.Time) {
		b.Helper()
		j := NewJob(id, created)
		j.Workload, j.Priority, j.ChunkCount = workload, priority, n
		for done := 0; done < n; {
			size := min(n-done, 50_000)
			tasks := NewTasks(j, n)[1:]
			tasks = tasks[done : done+size]
			for _, t := range tasks {
				t.RunAfter = runAfter
			}
			if err := s.TaskInsert(ctx, tasks); err != nil {
				b.Fatalf("insert: %v", err)
			}
			done += size
		}
	}
	now := at.Add(time.Hour)
	claim := func(b *testing.B, workloads []string) {
		got, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 1), Kinds: []domain.TaskKind{domain.KindChunk}, Workloads: workloads, Now: now})
		if err != nil || len(got) != 1 {
			b.Fatalf("TaskClaim = %d tasks, %v", len(got), err)
		}
	}
	// Workload A first in claim order, B after it.
	insert("a", "A", backlog, 0, at, at)
	insert("b", "B", 1000, 0, at.Add(time.Second), at)
	// In backoff: the highest priority, runnable only in a day.
	insert("wait", "C", backoff, 10, at, now.Add(24*time.Hour))
	insert("c", "C", 1000, 0, at, at)
	b.Run(fmt.Sprintf("rare-workload/backlog=%d", backlog), func(b *testing.B) {
		for b.Loop() {
			claim(b, []string{"B"})
		}
	})
	b.Run(fmt.Sprintf("backoff/backoff=%d", backoff), func(b *testing.B) {
		for b.Loop() {
			claim(b, []string{"C"})
		}
	})
}
