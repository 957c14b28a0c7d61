package postgres_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/store/storetest"
)

// TestResultStoredUncompressed checks what migration 0013 is for: a final
// CSV that compresses well is still stored out of line and uncompressed,
// so that the slices a download reads touch only their own chunks.
func TestResultStoredUncompressed(t *testing.T) {
	t.Parallel()
	s, url := openURL(t)
	conn := connect(t, url)
	var csv bytes.Buffer
	csv.WriteString("id,score\n")
	for i := range 20_000 {
		fmt.Fprintf(&csv, "molecule-%06d,0.5\n", i)
	}
	j := storetest.NewJob("j1", storetest.Epoch())
	j.Status, j.Result = domain.JobCompleted, csv.Bytes()
	if err := s.JobInsert(t.Context(), j); err != nil {
		t.Fatal(err)
	}

	var storage string
	err := conn.QueryRow(t.Context(),
		`SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'jobs'::regclass AND attname = 'result'`).Scan(&storage)
	if err != nil || storage != "e" {
		t.Errorf("jobs.result storage = %q, %v; want e (EXTERNAL)", storage, err)
	}
	var compression string
	var stored, size int64
	err = conn.QueryRow(t.Context(),
		`SELECT coalesce(pg_column_compression(result), 'none'), pg_column_size(result), octet_length(result) FROM jobs WHERE id = 'j1'`).
		Scan(&compression, &stored, &size)
	if err != nil || compression != "none" || size != int64(csv.Len()) || stored < size {
		t.Errorf("stored result: compression %s, %d bytes stored for %d, %v; want none, all %d bytes",
			compression, stored, size, err, csv.Len())
	}
	got, err := s.JobResultRead(t.Context(), &store.JobResultReadParams{ID: "j1", Offset: 100_000, Limit: 50})
	if err != nil || !bytes.Equal(got, csv.Bytes()[100_000:100_050]) {
		t.Errorf("JobResultRead(100000, 50) = %q, %v; want %q", got, err, csv.Bytes()[100_000:100_050])
	}
}
