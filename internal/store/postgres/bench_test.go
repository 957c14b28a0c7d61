package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// BenchmarkTaskInsert measures TaskInsert of one job's 100,000 chunk tasks
// per iteration into an empty table (the database must not grow with b.N:
// it may live on a RAM disk).
func BenchmarkTaskInsert(b *testing.B) {
	const n = 100_000
	s, url := openURL(b)
	conn, err := pgx.Connect(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if _, err := conn.Exec(b.Context(), `TRUNCATE tasks`); err != nil {
			b.Fatal(err)
		}
		tasks := storetest.NewTasks(storetest.NewJob(fmt.Sprintf("j%d", i), storetest.Epoch()), n)
		b.StartTimer()
		if err := s.TaskInsert(b.Context(), tasks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*(n+1))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkTaskClaim measures claims of one task at a time from a backlog
// of 100,000 pending tasks.
func BenchmarkTaskClaim(b *testing.B) {
	const n = 100_000
	s := open(b)
	j := storetest.NewJob("j", storetest.Epoch())
	if err := s.TaskInsert(b.Context(), storetest.NewTasks(j, n)[1:]); err != nil {
		b.Fatal(err)
	}
	p := &store.TaskClaimParams{Owners: slices.Repeat([]string{"w"}, 1), Kinds: []domain.TaskKind{domain.KindChunk}, Now: storetest.Epoch().Add(time.Minute)}
	for b.Loop() {
		got, err := s.TaskClaim(b.Context(), p)
		if err != nil || len(got) != 1 {
			b.Fatalf("TaskClaim = %d tasks, %v", len(got), err)
		}
	}
}

// BenchmarkClaimSkewed measures a claim for a rare workload behind a
// backlog of another, and a claim past many tasks in backoff.
//
//	go test -run '^$' -bench BenchmarkClaimSkewed -benchtime 500x -count 3 ./internal/store/postgres/
func BenchmarkClaimSkewed(b *testing.B) {
	s := open(b)
	storetest.BenchClaimSkewed(b, s, 1_000_000, 100_000)
}

// BenchmarkResults measures what charging usage adds to a run of results
// (storetest.BenchResults).
//
//	go test -run '^$' -bench BenchmarkResults -benchtime 200x -count 5 ./internal/store/postgres/
func BenchmarkResults(b *testing.B) {
	storetest.BenchResults(b, func(b *testing.B) store.Store { return open(b) })
}
