package engine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/pgtest"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// pieceCounter is a store that records the ranges of JobResultRead.
type pieceCounter struct {
	store.Store
	mu     sync.Mutex
	ranges [][2]int64 // offset, limit
}

func (p *pieceCounter) JobResultRead(ctx context.Context, rp *store.JobResultReadParams) ([]byte, error) {
	p.mu.Lock()
	p.ranges = append(p.ranges, [2]int64{rp.Offset, int64(rp.Limit)})
	p.mu.Unlock()
	return p.Store.JobResultRead(ctx, rp)
}

// readResult reads job id's final CSV whole, and checks that it is as long
// as the stream said.
func readResult(t *testing.T, e *engine.Engine, id string) []byte {
	t.Helper()
	res, err := e.OpenJobResult(t.Context(), id)
	if err != nil {
		t.Fatalf("JobResult(%s): %v", id, err)
	}
	b, err := io.ReadAll(res)
	if err != nil || int64(len(b)) != res.Size {
		t.Fatalf("read the result of %s: %d bytes, %v; want %d", id, len(b), err, res.Size)
	}
	return b
}

// insertCompleted stores a completed job with the final CSV result, as
// the stitcher would have.
func insertCompleted(t *testing.T, s store.Store, id string, result []byte) {
	t.Helper()
	j := storetest.NewJob(id, storetest.Epoch())
	sum := sha256.Sum256(result)
	j.Status, j.Result, j.ResultSHA256, j.FinishedAt = domain.JobCompleted, result, hex.EncodeToString(sum[:]), storetest.Epoch()
	if err := s.JobInsert(t.Context(), j); err != nil {
		t.Fatal(err)
	}
}

// bigResult returns a final CSV of a little over n bytes, different each
// byte, so that a piece out of place shows.
func bigResult(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return b
}

// TestJobResultStreamsInPieces checks that a final CSV larger than a piece
// comes back whole and exact, read from the store in contiguous pieces of
// at most ResultPiece bytes, through Read and through io.Copy alike.
func TestJobResultStreamsInPieces(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		want := bigResult(2*engine.ResultPiece + 12345)
		insertCompleted(t, s, "big", want)
		counter := &pieceCounter{Store: s}
		e := newEngine(counter, engine.Config{})

		res, err := e.OpenJobResult(t.Context(), "big")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(want)
		if res.Size != int64(len(want)) || res.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("stream of %d bytes, sha256 %s; want %d, %x", res.Size, res.SHA256, len(want), sum)
		}
		var got bytes.Buffer
		if n, err := io.Copy(&got, res); err != nil || n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("io.Copy = %d bytes, %v; equal %v; want all %d bytes", n, err, bytes.Equal(got.Bytes(), want), len(want))
		}
		var off int64
		for i, r := range counter.ranges {
			if r[0] != off || r[1] > engine.ResultPiece || r[1] <= 0 {
				t.Errorf("read %d of the store: %d bytes at %d; want at most %d at %d", i, r[1], r[0], engine.ResultPiece, off)
			}
			off += r[1]
		}
		if len(counter.ranges) != 3 || off != int64(len(want)) {
			t.Errorf("%d reads of the store covering %d bytes; want 3 covering %d", len(counter.ranges), off, len(want))
		}

		// Read, however small the buffer, and at the end io.EOF.
		res, err = e.OpenJobResult(t.Context(), "big")
		if err != nil {
			t.Fatal(err)
		}
		if err := iotest.TestReader(res, want); err != nil {
			t.Error(err)
		}
	})
}

// TestJobResultRefusals checks who gets no stream: a missing job, one
// still being created, one not completed.
func TestJobResultRefusals(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	e := newEngine(s, engine.Config{})
	creating := storetest.NewJob("creating", storetest.Epoch())
	creating.Creating = true
	running := storetest.NewJob("running", storetest.Epoch())
	running.Status = domain.JobRunning
	for _, j := range []*domain.Job{creating, running} {
		if err := s.JobInsert(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]error{"missing": domain.ErrNotFound, "creating": domain.ErrNotFound, "running": domain.ErrNotReady} {
		if res, err := e.OpenJobResult(t.Context(), id); !errors.Is(err, want) {
			t.Errorf("JobResult(%s) = %v, %v; want %v", id, res, err, want)
		}
	}
	insertCompleted(t, s, "empty", []byte{})
	res, err := e.OpenJobResult(t.Context(), "empty")
	if err != nil || res.Size != 0 {
		t.Fatalf("JobResult of an empty result = %+v, %v", res, err)
	}
	if b, err := io.ReadAll(res); err != nil || len(b) != 0 {
		t.Errorf("empty result read = %q, %v", b, err)
	}
}

// TestJobResultDeletedMidway checks that a download whose job retention
// deletes between two pieces fails with ErrNotFound instead of ending as
// if the CSV were whole.
func TestJobResultDeletedMidway(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		want := bigResult(engine.ResultPiece + 10)
		insertCompleted(t, s, "doomed", want)
		e := newEngine(s, engine.Config{})
		res, err := e.OpenJobResult(t.Context(), "doomed")
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, engine.ResultPiece)
		if _, err := io.ReadFull(res, first); err != nil || !bytes.Equal(first, want[:engine.ResultPiece]) {
			t.Fatalf("first piece: %v", err)
		}
		far := storetest.Epoch().Add(1000 * time.Hour)
		if gone, err := s.JobDelete(t.Context(), &store.JobDeleteParams{IDs: []string{"doomed"}, Before: far, Now: far}); err != nil || len(gone) != 1 {
			t.Fatalf("JobDelete = %v, %v", gone, err)
		}
		rest, err := io.ReadAll(res)
		if !errors.Is(err, domain.ErrNotFound) || len(rest) != 0 {
			t.Errorf("after the job is deleted: %d more bytes, %v; want none and ErrNotFound", len(rest), err)
		}
	})
}

// TestJobResultMemoryBounded: reading a final CSV of 64 MiB grows the
// heap by a few pieces and the driver's buffers (about 5 MiB on SQLite,
// 10 on PostgreSQL), not by the CSV: a read of the whole value grows it by
// twice the CSV (128 MiB: the driver's copy and the caller's). It is not
// parallel, so that the heap it samples is its own, and it collects
// garbage often (GOGC 5) so that the peak is what the read holds, not
// what the collector has yet to reclaim.
func TestJobResultMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a CSV of 64 MiB; not in -short")
	}
	size, bound := 64<<20, uint64(24<<20)
	if raceEnabled {
		size = 32 << 20 // SQLite's copies are slow under the detector: spare the suite
	}
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			var s store.Store
			if pg {
				s = openPG(t, pgtest.URL(t))
			} else {
				s = openStore(t)
			}
			insertCompleted(t, s, "big", bigResult(size))
			e := newEngine(s, engine.Config{})
			defer debug.SetGCPercent(debug.SetGCPercent(5))
			h := startHeapSampler()
			start := time.Now()
			res, err := e.OpenJobResult(t.Context(), "big")
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, res)
			elapsed := time.Since(start)
			heap, anon := h.Stop()
			t.Logf("%d MiB read in %v: heap peak +%.1f MiB, anonymous RSS peak +%.1f MiB",
				n>>20, elapsed.Round(time.Millisecond), float64(heap)/(1<<20), float64(anon)/(1<<20))
			if err != nil || n != int64(size) {
				t.Fatalf("read %d bytes, %v; want %d", n, err, size)
			}
			if heap > bound {
				t.Errorf("the heap grew by %.1f MiB reading a CSV of %d MiB; want at most %d MiB",
					float64(heap)/(1<<20), size>>20, bound>>20)
			}
		})
	}
}
