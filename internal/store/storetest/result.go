package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
)

// exerciseJobResult covers the ranged read of a job's final CSV and the
// size that reads of the job carry instead of the CSV.
func exerciseJobResult(t *testing.T, newStore newFunc) {
	t.Run("Ranges", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Incompressible bytes over many of PostgreSQL's TOAST chunks
		// (about 2 KB each), with NUL, 0xff and a split UTF-8 sequence, so
		// that ranges are of bytes, cross chunk boundaries and round-trip
		// whatever the bytes are.
		result := pseudoRandom(64<<10 + 13)
		copy(result[2040:], "é\x00\xff")
		j := NewJob("j1", Epoch())
		j.Status, j.Result = domain.JobCompleted, result
		insertJobs(t, s, j)
		n := int64(len(result))
		for _, c := range []struct {
			name   string
			offset int64
			limit  int
			want   []byte
		}{
			{"Start", 0, 10, result[:10]},
			{"Middle", 2041, 3000, result[2041:5041]},
			{"OneByte", n - 1, 1, result[n-1:]},
			{"LimitBeyondTheEnd", n - 100, 1 << 20, result[n-100:]},
			{"Whole", 0, int(n), result},
			{"AtTheEnd", n, 10, nil},
			{"PastTheEnd", n + 1000, 10, nil},
			{"ZeroLimit", 100, 0, nil},
		} {
			got, err := s.JobResultRead(t.Context(), &store.JobResultReadParams{ID: "j1", Offset: c.offset, Limit: c.limit})
			if err != nil {
				t.Errorf("%s: JobResultRead(%d, %d): %v", c.name, c.offset, c.limit, err)
				continue
			}
			if !bytes.Equal(got, c.want) {
				t.Errorf("%s: JobResultRead(%d, %d) = %d bytes, want %d: %s", c.name, c.offset, c.limit,
					len(got), len(c.want), firstDifference(got, c.want))
			}
		}
		if got := readResult(t, s, "j1", 4093); !bytes.Equal(got, result) {
			t.Errorf("the result read in pieces of 4093 bytes differs: %s", firstDifference(got, result))
		}
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insertJobs(t, s, NewJob("j1", Epoch()))
		_, err := s.JobResultRead(t.Context(), &store.JobResultReadParams{ID: "nope", Limit: 10})
		checkErr(t, "JobResultRead of a missing job", err, store.ErrNotFound)
		// Pinned: a job not stitched yet has no bytes to read, which is not
		// an error: the engine says whether a result may be read.
		got, err := s.JobResultRead(t.Context(), &store.JobResultReadParams{ID: "j1", Limit: 10})
		if err != nil || len(got) != 0 {
			t.Errorf("JobResultRead of a job without a result = %q, %v; want nothing, nil", got, err)
		}
	})

	t.Run("NegativeRange", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := NewJob("j1", Epoch())
		j.Result = []byte("id,score\n1,0.5\n")
		insertJobs(t, s, j)
		for _, p := range []*store.JobResultReadParams{{ID: "j1", Offset: -1, Limit: 5}, {ID: "j1", Limit: -1}} {
			if got, err := s.JobResultRead(t.Context(), p); err == nil {
				t.Errorf("JobResultRead(%d, %d) = %q, nil; want an error", p.Offset, p.Limit, got)
			}
		}
	})

	t.Run("ResultBytes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		done := NewJob("done", Epoch())
		done.Status, done.Result = domain.JobCompleted, pseudoRandom(10_000)
		done.IdempotencyKey = "key-done"
		empty := NewJob("empty", Epoch())
		empty.Status, empty.Result = domain.JobCompleted, []byte{}
		none := NewJob("none", Epoch())
		insertJobs(t, s, done, empty, none)
		if done.ResultBytes != 10_000 || empty.ResultBytes != 0 || none.ResultBytes != 0 {
			t.Errorf("after JobInsert ResultBytes = %d, %d, %d; want 10000, 0, 0",
				done.ResultBytes, empty.ResultBytes, none.ResultBytes)
		}
		want := map[string]int64{"done": 10_000, "empty": 0, "none": 0}
		for id, n := range want {
			if got := getJob(t, s, id); got.ResultBytes != n || got.Result != nil {
				t.Errorf("JobGet(%s): ResultBytes %d, Result %d bytes; want %d and nil", id, got.ResultBytes, len(got.Result), n)
			}
		}
		byKey, err := s.JobGetByIdempotencyKey(t.Context(), domain.AdminAccount, "key-done")
		if err != nil || byKey.ResultBytes != 10_000 {
			t.Errorf("JobGetByIdempotencyKey: %+v, %v; want ResultBytes 10000", byKey, err)
		}
		jobs, err := s.JobList(t.Context(), &store.JobListParams{Limit: 10})
		if err != nil || len(jobs) != 3 {
			t.Fatalf("JobList = %d jobs, %v; want 3", len(jobs), err)
		}
		for _, j := range jobs {
			if j.ResultBytes != want[j.ID] || j.Result != nil {
				t.Errorf("JobList's %s: ResultBytes %d, Result %d bytes; want %d and nil", j.ID, j.ResultBytes, len(j.Result), want[j.ID])
			}
		}

		// A new result written changes the size; an update without one
		// keeps both.
		j := getJob(t, s, "none")
		j.Status, j.Result = domain.JobCompleted, []byte("id,score\n7,0.9\n")
		if err := s.JobUpdate(t.Context(), j); err != nil {
			t.Fatalf("JobUpdate: %v", err)
		}
		if j.ResultBytes != 15 {
			t.Errorf("after JobUpdate with a result ResultBytes = %d, want 15", j.ResultBytes)
		}
		j = getJob(t, s, "none")
		if j.ResultBytes != 15 {
			t.Errorf("JobGet after JobUpdate: ResultBytes = %d, want 15", j.ResultBytes)
		}
		j.ResultBytes = 99 // never written
		j.Error = "kept"
		if err := s.JobUpdate(t.Context(), j); err != nil {
			t.Fatalf("JobUpdate without a result: %v", err)
		}
		if got := getJob(t, s, "none"); got.ResultBytes != 15 || string(readResult(t, s, "none", 4)) != "id,score\n7,0.9\n" {
			t.Errorf("after JobUpdate without a result: ResultBytes %d, result %q; want both kept",
				got.ResultBytes, readResult(t, s, "none", 4))
		}
	})
}

// readResult reads job id's final CSV whole through JobResultRead, piece
// bytes at a time.
func readResult(t *testing.T, q store.Querier, id string, piece int) []byte {
	t.Helper()
	var out []byte
	for {
		b, err := q.JobResultRead(t.Context(), &store.JobResultReadParams{ID: id, Offset: int64(len(out)), Limit: piece})
		if err != nil {
			t.Fatalf("JobResultRead(%s, %d, %d): %v", id, len(out), piece, err)
		}
		if len(b) > piece {
			t.Fatalf("JobResultRead(%s, %d, %d) returned %d bytes", id, len(out), piece, len(b))
		}
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
	}
}

// pseudoRandom returns n bytes that do not compress, the same every run.
func pseudoRandom(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// firstDifference says where got and want first differ.
func firstDifference(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %#x, want %#x", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	return "no difference"
}
