package sqlite

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// BenchmarkInTxConcurrent measures small write transactions (one job
// inserted in each) from one goroutine and from 64 at once: the throughput
// of the writer in transactions per second. "method" makes the same write
// through the Store itself, outside any transaction.
//
//	go test -run '^$' -bench BenchmarkInTxConcurrent -cpu 2 -count 5 ./internal/store/sqlite/
func BenchmarkInTxConcurrent(b *testing.B) {
	for _, bc := range []struct {
		name       string
		goroutines int
		inTx       bool
	}{
		{"goroutines=1", 1, true},
		{"goroutines=64", 64, true},
		{"method/goroutines=1", 1, false},
		{"method/goroutines=64", 64, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer s.Close()
			ctx := b.Context()
			var n atomic.Int64
			write := func() error {
				j := storetest.NewJob(fmt.Sprintf("job%09d", n.Add(1)), storetest.Epoch())
				if !bc.inTx {
					return s.JobInsert(ctx, j)
				}
				return s.InTx(ctx, func(q store.Querier) error { return q.JobInsert(ctx, j) })
			}
			if bc.goroutines == 1 {
				for b.Loop() {
					if err := write(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				procs := runtime.GOMAXPROCS(0)
				b.SetParallelism((bc.goroutines + procs - 1) / procs)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := write(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
		})
	}
}
