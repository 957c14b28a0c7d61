package engine_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/store"
)

// TestJobQuota: an account with max_jobs N has at most N unfinished jobs:
// one more is ErrQuotaExceeded, naming the quota, its limit and the use,
// and creates nothing; a replay of a job it has is still answered; once
// one finishes, another may be created; of many creations at once, on
// either store, exactly as many as are left pass.
func TestJobQuota(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		e := newEngine(s, engine.Config{Shard: "s0"})
		if _, _, err := e.CreateAccount(t.Context(), domain.Account{Name: "alice", MaxJobs: 2}); err != nil {
			t.Fatal(err)
		}
		alice := domain.WithCaller(t.Context(), domain.Caller{Account: "alice"})
		first, _, err := e.CreateJob(alice, spec(2), "key-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.CreateJob(alice, spec(1), ""); err != nil {
			t.Fatal(err)
		}
		_, _, err = e.CreateJob(alice, spec(1), "")
		if !errors.Is(err, domain.ErrQuotaExceeded) || !strings.Contains(err.Error(), "max_jobs") || !strings.Contains(err.Error(), "2 unfinished jobs of 2 allowed") {
			t.Fatalf("a third job: %v; want ErrQuotaExceeded naming max_jobs, 2 of 2", err)
		}
		if jobs, _, err := e.ListJobs(alice, engine.ListJobsParams{}); err != nil || len(jobs) != 2 {
			t.Fatalf("alice's jobs after the refusal: %d, %v; want 2", len(jobs), err)
		}
		if v, created, err := e.CreateJob(alice, spec(2), "key-1"); err != nil || created || v.ID != first.ID {
			t.Errorf("a replay at the quota: %v, created %v, %v; want the first job again", v, created, err)
		}
		// Another account's jobs are not counted against it.
		if _, _, err := e.CreateJob(t.Context(), spec(1), ""); err != nil {
			t.Errorf("the admin's job while alice is at her quota: %v", err)
		}
		if _, err := e.CancelJob(alice, first.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.CreateJob(alice, spec(1), ""); err != nil {
			t.Errorf("a job once one finished: %v", err)
		}

		// Many at once: exactly the room left passes.
		five := 5
		if _, err := e.UpdateAccount(t.Context(), "alice", engine.AccountChange{MaxJobs: &five}); err != nil {
			t.Fatal(err)
		}
		var ok, refused atomic.Int32
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				_, _, err := e.CreateJob(alice, spec(1), "")
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, domain.ErrQuotaExceeded):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 3 || refused.Load() != 9 {
			t.Errorf("12 creations at once with room for 3: %d passed, %d refused", ok.Load(), refused.Load())
		}
		if n, err := s.JobCountUnfinished(t.Context(), "alice"); err != nil || n != 5 {
			t.Errorf("alice's unfinished jobs: %d, %v; want 5, her quota", n, err)
		}
	})
}

// TestStorageQuota: an account with max_storage has at most that many
// bytes of uploads. An upload whose declared size does not fit is
// refused before a byte of it is read; one that does not say is cut off
// where it crosses the quota; both leave no row and no blob. An upload
// that fits exactly passes, and of uploads at once that each fit alone,
// on either store, only as many as fit together are kept.
func TestStorageQuota(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, s store.Store) {
		dir := t.TempDir()
		blobs, err := blob.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(s, engine.Config{Shard: "s0", Blobs: blobs})
		if _, _, err := e.CreateAccount(t.Context(), domain.Account{Name: "alice", MaxStorage: 100}); err != nil {
			t.Fatal(err)
		}
		alice := domain.WithCaller(t.Context(), domain.Caller{Account: "alice"})
		table := func(n int) string { return "id\n" + strings.Repeat("x\n", (n-3)/2) + strings.Repeat("y", (n-3)%2) }
		files := func() int {
			t.Helper()
			n := 0
			_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && d.Name() != blob.MarkerName {
					n++
				}
				return nil
			})
			return n
		}
		if _, err := e.CreateUpload(alice, strings.NewReader(table(60)), -1); err != nil {
			t.Fatal(err)
		}
		before := files()

		refused := func(what string, r io.Reader, declared int64) {
			t.Helper()
			_, err := e.CreateUpload(alice, r, declared)
			if !errors.Is(err, domain.ErrQuotaExceeded) || !strings.Contains(err.Error(), "max_storage") || !strings.Contains(err.Error(), "60 bytes of 100 allowed") {
				t.Errorf("%s: %v; want ErrQuotaExceeded naming max_storage, 60 bytes of 100", what, err)
			}
			if n, err := s.UploadSumBytes(t.Context(), "alice"); err != nil || n != 60 {
				t.Errorf("%s: alice's uploads hold %d bytes, %v; want 60, as before", what, n, err)
			}
			if n := files(); n != before {
				t.Errorf("%s: %d files under the blob directory, want %d, as before", what, n, before)
			}
		}
		declared := &countingReader{r: strings.NewReader(table(41))}
		refused("41 bytes declared", declared, 41)
		if declared.n.Load() != 0 {
			t.Errorf("an upload declared too large was read for %d bytes before it was refused, want none", declared.n.Load())
		}
		refused("41 bytes undeclared", strings.NewReader(table(41)), -1)
		gigabyte := &countingReader{r: io.MultiReader(strings.NewReader("id\n"), &repeatReader{b: 'x', n: 1 << 30})}
		refused("a gigabyte undeclared", gigabyte, -1)
		if n := gigabyte.n.Load(); n > 1<<20 {
			t.Errorf("an undeclared upload over the quota was read for %d bytes before it was cut off, want at most a read's worth", n)
		}

		// Uploads at once that each fit alone, read to their ends
		// together: one is kept.
		var ok, over atomic.Int32
		var wg, read sync.WaitGroup
		read.Add(6)
		for range 6 {
			wg.Go(func() {
				_, err := e.CreateUpload(alice, &together{r: strings.NewReader(table(30)), all: &read}, -1)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, domain.ErrQuotaExceeded):
					over.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 || over.Load() != 5 {
			t.Errorf("6 uploads of 30 bytes at once with 40 left: %d kept, %d refused; want 1 and 5", ok.Load(), over.Load())
		}
		if n, err := s.UploadSumBytes(t.Context(), "alice"); err != nil || n != 90 {
			t.Errorf("alice's uploads: %d bytes, %v; want 90", n, err)
		}
		if n := files(); n != before+1 {
			t.Errorf("%d files under the blob directory, want %d: the refused uploads left theirs", n, before+1)
		}
		if _, err := e.CreateUpload(alice, strings.NewReader(table(10)), 10); err != nil {
			t.Errorf("an upload that fits exactly: %v", err)
		}
	})
}

// countingReader counts what is read of r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// repeatReader is n bytes of b.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// together is r, whose end waits until every reader of all reached its
// own: so that uploads reach their transactions at once.
type together struct {
	r    io.Reader
	all  *sync.WaitGroup
	once sync.Once
}

func (t *together) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err == io.EOF {
		t.once.Do(func() { t.all.Done(); t.all.Wait() })
	}
	return n, err
}
