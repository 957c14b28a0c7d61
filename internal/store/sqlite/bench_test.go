package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// BenchmarkTaskClaim measures task lifecycles on a large backlog: each
// operation claims one task in a transaction (claim, mark its job running)
// and completes it in another (read, write the result, tell the stitch task),
// as the engine does. "parallel" runs GOMAXPROCS claimers at once.
//
//	go test -run '^$' -bench BenchmarkTaskClaim -benchtime 20000x ./internal/store/sqlite/
func BenchmarkTaskClaim(b *testing.B) {
	for _, backlog := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer s.Close()
			f := &feeder{s: s}
			f.fill(b, backlog)
			b.Run("serial", func(b *testing.B) {
				for b.Loop() {
					lifecycle(b, f, "w")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lifecycles/s")
			})
			b.Run("parallel", func(b *testing.B) {
				var n atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					me := fmt.Sprintf("w%d", n.Add(1))
					for pb.Next() {
						lifecycle(b, f, me)
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lifecycles/s")
			})
		})
	}
}

// feeder keeps the backlog from running dry.
type feeder struct {
	s    *Store
	mu   sync.Mutex
	jobs int
}

// fill inserts n pending chunk tasks in jobs of 10,000.
func (f *feeder) fill(b *testing.B, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n > 0 {
		size := min(n, 10_000)
		j := storetest.NewJob(fmt.Sprintf("job%06d", f.jobs), storetest.Epoch().Add(time.Duration(f.jobs)*time.Second))
		j.ChunkCount = size
		f.jobs++
		err := f.s.InTx(b.Context(), func(q store.Querier) error {
			if err := q.JobInsert(b.Context(), j); err != nil {
				return err
			}
			return q.TaskInsert(b.Context(), storetest.NewTasks(j, size))
		})
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
		n -= size
	}
}

var chunkOnly = []domain.TaskKind{domain.KindChunk}

func lifecycle(b *testing.B, f *feeder, owner string) {
	ctx := b.Context()
	now := storetest.Epoch().Add(time.Hour)
	var claimed []*domain.Task
	for claimed == nil {
		ts, err := f.s.TaskClaim(ctx, &store.TaskClaimParams{Owners: []string{owner}, Kinds: chunkOnly, Now: now})
		if len(ts) > 0 {
			claimed = ts
		}
		if err != nil {
			b.Fatalf("claim: %v", err)
		}
		if claimed == nil {
			f.fill(b, 10_000)
		}
	}
	id := claimed[0].ID
	err := f.s.InTx(ctx, func(q store.Querier) error {
		t, err := q.TaskGet(ctx, id)
		if err != nil {
			return err
		}
		if !t.HoldsLease(owner, t.Attempt, now) {
			return fmt.Errorf("task %s: lease lost", id)
		}
		t.State, t.Result, t.LeaseExpiresAt, t.UpdatedAt, t.FinishedAt = domain.TaskCompleted, []byte("id,score\n1,0.5\n"), time.Time{}, now, now
		if err := q.TaskUpdate(ctx, t); err != nil {
			return err
		}
		_, err = q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: t.DownstreamID, N: 1, Now: now})
		return err
	})
	if err != nil {
		b.Fatalf("complete %s: %v", id, err)
	}
}

// BenchmarkBatchLifecycle measures the store's part of lifecycles as runs
// of the engine make them, which SQLite's one writer does one after
// another: a claim of n tasks, then their results written in one
// transaction without a read (the engine's leases remembered) and their
// stitch task told once. It reports the writer's time per lifecycle, the
// bound of the batch form whatever runs around it; runs of 1 and 7 show
// what each run costs whatever its size. The sub-benchmarks without an
// index show what keeping that index up to date costs a lifecycle (an
// experiment: the reads that need the index are not run).
//
//	go test -run '^$' -bench BenchmarkBatchLifecycle -count 3 ./internal/store/sqlite/
func BenchmarkBatchLifecycle(b *testing.B) {
	cases := []struct {
		n       int
		without string
	}{{1, ""}, {7, ""}, {50, ""}, {50, "tasks_job_kind_state"}, {50, "tasks_lease_expiry"}, {50, "tasks_claim_workload"},
		{50, "tasks_job_kind_state,tasks_lease_expiry,tasks_claim_workload"}}
	for _, c := range cases {
		name := fmt.Sprintf("run=%d", c.n)
		if c.without != "" {
			name += "/without=" + c.without
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer s.Close()
			for ix := range strings.SplitSeq(c.without, ",") {
				if ix == "" {
					continue
				}
				if _, err := s.writer.ExecContext(b.Context(), "DROP INDEX "+ix); err != nil {
					b.Fatal(err)
				}
			}
			f := &feeder{s: s}
			f.fill(b, max(60_000, b.N*c.n+10_000))
			ctx := b.Context()
			now := storetest.Epoch().Add(time.Hour)
			owners := make([]string, c.n)
			for i := range owners {
				owners[i] = fmt.Sprintf("w%d", i)
			}
			lifecycles := 0
			b.ResetTimer()
			for range b.N {
				ts, err := s.TaskClaim(ctx, &store.TaskClaimParams{Owners: owners, Kinds: chunkOnly, Now: now})
				if err != nil {
					b.Fatalf("claim: %v", err)
				}
				if len(ts) < len(owners) {
					b.Fatalf("claimed %d tasks, want %d", len(ts), len(owners))
				}
				lifecycles += len(ts)
				err = s.InTx(ctx, func(q store.Querier) error {
					for _, t := range ts {
						t.State, t.Result, t.LeaseExpiresAt, t.UpdatedAt, t.FinishedAt = domain.TaskCompleted, []byte("id,score\n1,0.5\n"), time.Time{}, now, now
					}
					if err := q.TaskUpdateMany(ctx, ts); err != nil {
						return err
					}
					_, err := q.TaskDecrementUpstreams(ctx, &store.TaskDecrementUpstreamsParams{ID: ts[0].DownstreamID, N: len(ts), Now: now})
					return err
				})
				if err != nil {
					b.Fatalf("results: %v", err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(lifecycles), "µs/lifecycle")
		})
	}
}

// BenchmarkJobChart measures what the dashboard's chart of a job reads: its
// completed chunks counted in 300 time buckets by the database, beside
// reading every completion time, as the first version did.
//
//	go test -run '^$' -bench BenchmarkJobChart -count 5 ./internal/store/sqlite/
func BenchmarkJobChart(b *testing.B) {
	const chunks = 200_000
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer s.Close()
	at := storetest.Epoch()
	j := storetest.NewJob("big", at)
	tasks := storetest.NewTasks(j, chunks)
	for i, t := range tasks[1:] {
		t.State, t.Attempt = domain.TaskCompleted, 1
		t.FinishedAt = at.Add(time.Duration(i) * time.Millisecond)
	}
	if err := s.JobInsert(b.Context(), j); err != nil {
		b.Fatal(err)
	}
	if err := s.TaskInsert(b.Context(), tasks); err != nil {
		b.Fatal(err)
	}
	b.Run("counts", func(b *testing.B) {
		p := &store.TaskCountFinishedParams{JobID: "big", Start: at, Width: time.Second, Buckets: 300}
		for b.Loop() {
			if _, err := s.TaskCountFinished(b.Context(), p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("all-times", func(b *testing.B) {
		for b.Loop() {
			n := 0
			rows, err := s.reader.QueryContext(b.Context(),
				`SELECT finished_at FROM tasks WHERE job_id = ? AND kind = 'chunk' AND state = 'completed' ORDER BY finished_at`, "big")
			for err == nil && rows.Next() {
				var v int64
				n++
				err = rows.Scan(&v)
			}
			if err == nil {
				err = rows.Err()
				rows.Close()
			}
			if err != nil || n != chunks {
				b.Fatalf("read %d times: %v", n, err)
			}
		}
	})
}

// BenchmarkClaimSkewed measures a claim for a rare workload behind a
// backlog of another, and a claim past many tasks in backoff.
//
//	go test -run '^$' -bench BenchmarkClaimSkewed -benchtime 500x -count 3 ./internal/store/sqlite/
func BenchmarkClaimSkewed(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer s.Close()
	storetest.BenchClaimSkewed(b, s, 1_000_000, 100_000)
}

// BenchmarkResults measures what charging usage adds to a run of results
// (storetest.BenchResults).
//
//	go test -run '^$' -bench BenchmarkResults -benchtime 200x -count 5 ./internal/store/sqlite/
func BenchmarkResults(b *testing.B) {
	storetest.BenchResults(b, func(b *testing.B) store.Store {
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

// BenchmarkClaimAccounts: fair and FIFO claims among the work of one
// account and of 100 accounts of 10 jobs (storetest.BenchClaimAccounts).
//
//	go test -run '^$' -bench BenchmarkClaimAccounts -benchtime 1000x ./internal/store/sqlite/
func BenchmarkClaimAccounts(b *testing.B) {
	for _, c := range []struct{ accounts, jobs, n int }{{1, 1, 1}, {1, 1, 10}, {100, 10, 1}, {100, 10, 10}} {
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		storetest.BenchClaimAccounts(b, s, c.accounts, c.jobs, 30_000/c.jobs/c.accounts+1, c.n)
		s.Close()
	}
}
