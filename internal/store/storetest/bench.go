package storetest

import (
	"fmt"
	"slices"
	"syscall"
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

// BenchResults measures what charging usage adds to the transaction that
// records a run of results: for runs of 1, 50 and 1,000 results, the
// claim of that many tasks, then one transaction that writes their
// results (TaskUpdateMany, as the engine does from its leases
// remembered), tells their stitch task, and, with usage, adds their time
// to one usage row (UsageAdd), as every run of one account's results
// does. newStore returns a fresh, empty store. It reports microseconds
// per lifecycle, and the CPU time the process spent per lifecycle (all of
// it for SQLite, which runs in the process; the client's part for
// PostgreSQL), which a busy machine disturbs less than the wall clock.
func BenchResults(b *testing.B, newStore func(b *testing.B) store.Store) {
	for _, n := range []int{1, 50, 1000} {
		for _, usage := range []bool{false, true} {
			b.Run(fmt.Sprintf("run=%d/usage=%t", n, usage), func(b *testing.B) {
				s := newStore(b)
				ctx := b.Context()
				j := NewJob("j", Epoch())
				total := b.N*n + 1
				all := NewTasks(j, total)[1:]
				for len(all) > 0 {
					k := min(len(all), 50_000)
					if err := s.TaskInsert(ctx, all[:k]); err != nil {
						b.Fatal(err)
					}
					all = all[k:]
				}
				root := NewTasks(j, total)[0]
				if err := s.TaskInsert(ctx, []*domain.Task{root}); err != nil {
					b.Fatal(err)
				}
				now := Epoch().Add(time.Hour)
				owners := slices.Repeat([]string{"w"}, n)
				cpu := cpuTime()
				b.ResetTimer()
				for range b.N {
					ts, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: owners, Kinds: []domain.TaskKind{domain.KindChunk}, Now: now})
					if err != nil || len(ts) != n {
						b.Fatalf("claim: %d tasks, %v", len(ts), err)
					}
					err = s.InTx(ctx, func(q store.Querier) error {
						for _, t := range ts {
							t.State, t.Result, t.LeaseExpiresAt, t.UpdatedAt, t.FinishedAt = domain.TaskCompleted, []byte("id,score\n1,0.5\n"), time.Time{}, now, now
						}
						if err := q.TaskUpdateMany(ctx, ts); err != nil {
							return err
						}
						if _, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: root.ID, N: n, Now: now}); err != nil {
							return err
						}
						if !usage {
							return nil
						}
						return q.UsageAdd(ctx, []store.UsageRow{{Hour: now.Truncate(time.Hour), Account: j.Owner, Workload: j.Workload,
							Tasks: int64(n), WorkerMicros: int64(n) * 1_000_000}})
					})
					if err != nil {
						b.Fatalf("results: %v", err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/lifecycle")
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N*n), "cpu-µs/lifecycle")
			})
		}
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchClaimAccounts measures claims of n tasks, fair and FIFO, on s (an
// empty store) holding the work of accounts accounts with jobs jobs each,
// every claimed task completed before the next claim, as a lifecycle of
// workers that finish at once: an operation is one claim and the
// completion of what it leased. Run with -benchtime of at most
// perJob·jobs·accounts/n x.
func BenchClaimAccounts(b *testing.B, s store.Store, accounts, jobs, perJob, n int) {
	ctx := b.Context()
	at := Epoch()
	for a := range accounts {
		for j := range jobs {
			if err := s.TaskInsert(ctx, ownedJob(fmt.Sprintf("acct%03d", a), fmt.Sprintf("j%03d-%02d", a, j), at.Add(time.Duration(j)*time.Second), 0, perJob, "w")); err != nil {
				b.Fatalf("insert: %v", err)
			}
		}
	}
	owners := slices.Repeat([]string{"w"}, n)
	now := at.Add(time.Hour)
	for _, fair := range []bool{false, true} {
		name := "fifo"
		if fair {
			name = "fair"
		}
		b.Run(fmt.Sprintf("%s/accounts=%d/jobs=%d/n=%d", name, accounts, jobs, n), func(b *testing.B) {
			for b.Loop() {
				got, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: owners, Kinds: []domain.TaskKind{domain.KindChunk}, Workloads: []string{"w"},
					Now: now, Fair: fair, WorkEpoch: 1})
				if err != nil || len(got) != n {
					b.Fatalf("TaskClaim = %d tasks, %v", len(got), err)
				}
				for _, tk := range got {
					tk.State, tk.FinishedAt, tk.UpdatedAt, tk.LeaseExpiresAt = domain.TaskCompleted, now, now, time.Time{}
				}
				if err := s.TaskUpdateMany(ctx, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
