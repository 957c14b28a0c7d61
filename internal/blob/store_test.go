package blob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/s3test"
)

func TestMain(m *testing.M) {
	if url := os.Getenv("BLOB_TEST_WRITER"); url != "" {
		writeForever(url)
		return
	}
	s3test.Main(m)
}

// stores are the stores each conformance test runs on: files in a
// directory, and a bucket of a real S3-compatible store.
var stores = []struct {
	name string
	url  func(t *testing.T) (rawURL, dataDir string)
}{
	{"files", func(t *testing.T) (string, string) { return "", t.TempDir() }},
	{"s3", func(t *testing.T) (string, string) { return s3test.Bucket(t), "" }},
}

// eachStore runs body on every store, in parallel.
func eachStore(t *testing.T, body func(t *testing.T, s blob.Store, rawURL, dataDir string)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			rawURL, dataDir := st.url(t)
			s, err := blob.Open(t.Context(), rawURL, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			body(t, s, rawURL, dataDir)
		})
	}
}

// key is the blob name of label: its bytes in hex, padded with zeros to
// the shape of the names SciMesh gives blobs.
func key(label string) string { return fmt.Sprintf("u-%024x", label) }

func put(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	n, err := w.Commit()
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Commit = %d, %v; want %d bytes", n, err, len(data))
	}
}

func read(t *testing.T, s blob.Store, key string, off, n int64) ([]byte, error) {
	t.Helper()
	r, err := s.OpenRange(t.Context(), key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func list(t *testing.T, fn func(context.Context, func([]blob.Info) error) error) map[string]blob.Info {
	t.Helper()
	got := map[string]blob.Info{}
	if err := fn(t.Context(), func(page []blob.Info) error {
		for _, i := range page {
			got[i.Key] = i
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// data is n bytes that differ from place to place, so that a read from
// the wrong offset shows.
func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i*7%26)
	}
	return b
}

func TestWriteAndReadRanges(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, _, _ string) {
		// Larger than a part of a multipart upload (16 MiB), so the
		// bucket writes several.
		want := data(40<<20 + 123)
		w, err := s.Create(t.Context(), key("big"))
		if err != nil {
			t.Fatal(err)
		}
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1<<20+7)
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if _, err := read(t, s, key("big"), 0, -1); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("read before Commit = %v, want ErrNotFound", err)
		}
		if n, err := w.Commit(); err != nil || n != int64(len(want)) {
			t.Fatalf("Commit = %d, %v; want %d", n, err, len(want))
		}
		w.Abort() // after Commit: must not remove the blob
		got, err := read(t, s, key("big"), 0, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read whole: %d bytes, %v; want %d equal bytes", len(got), err, len(want))
		}
		for _, r := range [][2]int64{{0, 1}, {5, 10}, {16<<20 - 3, 7}, {int64(len(want)) - 9, 9}, {1234, -1}} {
			got, err := read(t, s, key("big"), r[0], r[1])
			wantR := want[r[0]:]
			if r[1] >= 0 {
				wantR = wantR[:r[1]]
			}
			if err != nil || !bytes.Equal(got, wantR) {
				t.Errorf("read [%d, +%d): %d bytes, %v; want %d equal bytes", r[0], r[1], len(got), err, len(wantR))
			}
		}
		if got := list(t, s.List); len(got) != 1 || got[key("big")].Size != int64(len(want)) {
			t.Fatalf("List = %v, want u-big of %d bytes", got, len(want))
		}
	})
}

func TestAbortLeavesNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, _, _ string) {
		for _, size := range []int{7, 20 << 20} { // one request, and several parts
			w, err := s.Create(t.Context(), key("aborted"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data(size)); err != nil {
				t.Fatal(err)
			}
			w.Abort()
			w.Abort()
			if _, err := w.Commit(); err == nil {
				t.Fatal("Commit after Abort succeeded")
			}
			if _, err := read(t, s, key("aborted"), 0, -1); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("read of an aborted blob of %d bytes = %v, want ErrNotFound", size, err)
			}
			if got := list(t, s.List); len(got) != 0 {
				t.Fatalf("List after Abort of %d bytes = %v", size, got)
			}
			if got := list(t, s.ListTemp); len(got) != 0 {
				t.Fatalf("ListTemp after Abort of %d bytes = %v", size, got)
			}
		}
	})
}

func TestNamesAndMissing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, _, _ string) {
		for _, k := range []string{"../../etc/passwd", "", "u", "UPPER", "a/b", key("none")} {
			if _, err := s.OpenRange(t.Context(), k, 0, -1); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("OpenRange(%q) = %v, want ErrNotFound", k, err)
			}
		}
		// Only names shaped as SciMesh's (u- and 24 hex digits) are blobs.
		for _, k := range []string{"../escape", "a/b", "X", "latest", "u-a", "u-" + strings.Repeat("A", 24), key("x") + "0"} {
			if w, err := s.Create(t.Context(), k); err == nil {
				w.Abort()
				t.Errorf("Create(%q) succeeded", k)
			}
			if err := s.Remove(t.Context(), k); err == nil {
				t.Errorf("Remove(%q) succeeded", k)
			}
		}
		if err := s.RemoveTemp(t.Context(), "../files/"+key("b")); err == nil {
			t.Error("RemoveTemp of a name that is no leftover's succeeded")
		}
		if s.String() == "" {
			t.Error("String is empty")
		}
	})
}

func TestListAndRemove(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, _, _ string) {
		for _, label := range []string{"a", "b"} {
			put(t, s, key(label), []byte("u-"+label))
		}
		pending, err := s.Create(t.Context(), key("c")) // being written
		if err != nil {
			t.Fatal(err)
		}
		defer pending.Abort()
		pending.Write([]byte("partial"))
		if got := list(t, s.List); len(got) != 2 || got[key("a")].Size != 3 || got[key("b")].Size != 3 || got[key("a")].ModTime.IsZero() {
			t.Fatalf("List = %v, want u-a and u-b of 3 bytes with their times", got)
		}
		if err := s.Remove(t.Context(), key("a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Remove(t.Context(), key("a")); err != nil {
			t.Fatalf("Remove of a removed blob: %v", err)
		}
		if _, err := read(t, s, key("a"), 0, -1); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("read of a removed blob = %v, want ErrNotFound", err)
		}
		if got := list(t, s.List); len(got) != 1 || got[key("b")].Key == "" {
			t.Fatalf("List after Remove = %v, want u-b", got)
		}
	})
}

func TestListPages(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, _, _ string) {
		const n = 600 // more than a page
		for i := range n {
			put(t, s, key(fmt.Sprintf("%04d", i)), []byte("x"))
		}
		pages, seen := 0, map[string]bool{}
		if err := s.List(t.Context(), func(page []blob.Info) error {
			pages++
			if len(page) > 512 {
				t.Errorf("a page of %d blobs", len(page))
			}
			for _, i := range page {
				seen[i.Key] = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != n || pages < 2 {
			t.Fatalf("List gave %d blobs in %d pages, want %d in at least 2", len(seen), pages, n)
		}
		stop := errors.New("enough")
		if err := s.List(t.Context(), func([]blob.Info) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("List returned %v, want the function's error", err)
		}
	})
}

// TestCrashMidWriteLeavesNothingListed kills a process with SIGKILL while
// it writes a blob: the blob is never listed or read, its leftover is
// listed by ListTemp, and RemoveTemp clears it.
func TestCrashMidWriteLeavesNothingListed(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, rawURL, dataDir string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "BLOB_TEST_WRITER="+rawURL+"|"+dataDir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		// Wait until the write has left something in the store (for a
		// bucket: a multipart upload with a part).
		deadline := time.Now().Add(60 * time.Second)
		for len(list(t, s.ListTemp)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the writer left nothing in the store within 60 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if got := list(t, s.List); len(got) != 0 {
			t.Fatalf("List after a crash mid-write = %v, want nothing", got)
		}
		if _, err := read(t, s, key("crashed"), 0, -1); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("read of a blob whose writer crashed = %v, want ErrNotFound", err)
		}
		temp := list(t, s.ListTemp)
		if len(temp) != 1 {
			t.Fatalf("ListTemp after the crash = %v, want the one leftover", temp)
		}
		for name := range temp {
			if err := s.RemoveTemp(t.Context(), name); err != nil {
				t.Fatal(err)
			}
			if err := s.RemoveTemp(t.Context(), name); err != nil {
				t.Fatalf("RemoveTemp of a removed leftover: %v", err)
			}
		}
		if got := list(t, s.ListTemp); len(got) != 0 {
			t.Fatalf("ListTemp after RemoveTemp = %v", got)
		}
		put(t, s, key("crashed"), []byte("again")) // the retried write
		if got, err := read(t, s, key("crashed"), 0, -1); err != nil || string(got) != "again" {
			t.Fatalf("the retried write reads %q, %v", got, err)
		}
	})
}

// writeForever is the child of TestCrashMidWriteLeavesNothingListed: it
// writes the blob u-crashed of the store "URL|DATADIR" until it is killed.
func writeForever(arg string) {
	rawURL, dataDir, _ := strings.Cut(arg, "|")
	s, err := blob.Open(context.Background(), rawURL, dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w, err := s.Create(context.Background(), key("crashed"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b := data(1 << 20)
	for {
		if _, err := w.Write(b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPresignRange(t *testing.T) {
	t.Parallel()
	s, err := blob.Open(t.Context(), s3test.Bucket(t)+"", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := data(1000)
	put(t, s, key("signed"), want)
	ps := s.(blob.Presigner)
	sr, err := ps.PresignRange(t.Context(), key("signed"), 100, 50, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if sr.Range != "bytes=100-149" {
		t.Fatalf("Range = %q, want bytes=100-149", sr.Range)
	}
	get := func(url, rng string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get(sr.URL, sr.Range); code != http.StatusPartialContent || !bytes.Equal(b, want[100:150]) {
		t.Fatalf("GET of the signed range: %d, %q; want 206 and bytes 100-149", code, b)
	}
	// The signature covers the range: another range, or none, is refused.
	for _, rng := range []string{"", "bytes=0-999", "bytes=100-150"} {
		if code, _ := get(sr.URL, rng); code != http.StatusForbidden {
			t.Errorf("GET of the signed URL with Range %q: %d, want 403", rng, code)
		}
	}
	short, err := ps.PresignRange(t.Context(), key("signed"), 0, 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if code, _ := get(short.URL, short.Range); code != http.StatusForbidden {
		t.Errorf("GET of an expired signed URL: %d, want 403", code)
	}
	if _, err := ps.PresignRange(t.Context(), key("signed"), 0, 0, time.Minute); err == nil {
		t.Error("PresignRange of 0 bytes succeeded")
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"s3://", "s3://bucket?endpoint=ftp://x", "s3://bucket?colour=red", "gs://bucket", "s3://user:pw@bucket",
		"/some/dir"} {
		_, err := blob.Open(t.Context(), u, t.TempDir())
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("Open(%q) error shows the password: %v", u, err)
		}
	}
	// A bucket that does not exist is refused at once, naming it.
	base := s3test.Bucket(t)
	missing := strings.Replace(base, "s3://", "s3://no-such-bucket-", 1)
	if _, err := blob.Open(t.Context(), missing, ""); err == nil || !strings.Contains(err.Error(), "no-such-bucket-") {
		t.Errorf("Open of a missing bucket = %v, want an error naming it", err)
	}
}

func TestPrefixKeepsToItsOwn(t *testing.T) {
	t.Parallel()
	base := s3test.Bucket(t)
	name, query, _ := strings.Cut(strings.TrimPrefix(base, "s3://"), "?")
	a, err := blob.Open(t.Context(), "s3://"+name+"/lab/a?"+query, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := blob.Open(t.Context(), "s3://"+name+"/lab/b?"+query, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put(t, a, key("1"), []byte("in a"))
	put(t, b, key("2"), []byte("in b"))
	if got := list(t, a.List); len(got) != 1 || got[key("1")].Key == "" {
		t.Fatalf("List under prefix a = %v, want only u-1", got)
	}
	if _, err := read(t, b, key("1"), 0, -1); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("b reads a's blob: %v", err)
	}
	if !strings.Contains(a.String(), "/lab/a/") {
		t.Errorf("String = %q, want the prefix in it", a.String())
	}
}

// foreignNames are names another application may give its files or
// objects beside SciMesh's.
var foreignNames = []string{"latest", "checkpoint-7", "notes.txt"}

// TestForeignNamesAreLeftAlone puts files (or objects, and unfinished
// multipart uploads) of another application where the store keeps its
// own: none is listed, as a blob or as a leftover, and none can be
// removed; the store's own blob is listed.
func TestForeignNamesAreLeftAlone(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, rawURL, dataDir string) {
		put(t, s, key("own"), []byte("ours"))
		var uploads []string // foreign unfinished uploads, as RemoveTemp would name them
		for _, name := range foreignNames {
			if dataDir != "" {
				for _, sub := range []string{"files", "tmp"} {
					if err := os.WriteFile(filepath.Join(dataDir, "blobs", sub, name), []byte("theirs"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			s3test.Put(t, rawURL, name, []byte("theirs"))
			uploads = append(uploads, name+"?upload="+s3test.StartUpload(t, rawURL, name))
		}
		if got := list(t, s.List); len(got) != 1 || got[key("own")].Key == "" {
			t.Errorf("List = %v, want only the store's own blob", got)
		}
		if got := list(t, s.ListTemp); len(got) != 0 {
			t.Errorf("ListTemp = %v, want no leftover", got)
		}
		for _, name := range append(foreignNames, uploads...) {
			if err := s.Remove(t.Context(), name); err == nil {
				t.Errorf("Remove(%q) succeeded", name)
			}
			if err := s.RemoveTemp(t.Context(), name); err == nil {
				t.Errorf("RemoveTemp(%q) succeeded", name)
			}
		}
		if dataDir != "" {
			for _, name := range foreignNames {
				for _, sub := range []string{"files", "tmp"} {
					if _, err := os.Stat(filepath.Join(dataDir, "blobs", sub, name)); err != nil {
						t.Errorf("the foreign file %s/%s: %v", sub, name, err)
					}
				}
			}
			return
		}
		objects := s3test.Objects(t, rawURL)
		for _, name := range foreignNames {
			if !slices.Contains(objects, name) {
				t.Errorf("the foreign object %s is gone; objects: %v", name, objects)
			}
		}
		if ups := s3test.Uploads(t, rawURL); len(ups) != len(uploads) {
			t.Errorf("unfinished uploads %v, want the %d foreign ones", ups, len(uploads))
		}
	})
}

// TestBind binds a store to one database: the first Bind writes the
// marker, which a later Bind of the same database finds, also through
// another handle on the store; a Bind of another database is refused,
// naming both and the marker; of several first Binds at once exactly one
// wins. The marker is neither a blob nor a leftover.
func TestBind(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s blob.Store, rawURL, dataDir string) {
		const mine, theirs = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
		if err := s.Bind(t.Context(), mine); err != nil {
			t.Fatalf("the first Bind: %v", err)
		}
		again, err := blob.Open(t.Context(), rawURL, dataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		if err := again.Bind(t.Context(), mine); err != nil {
			t.Fatalf("Bind of the same database again: %v", err)
		}
		err = again.Bind(t.Context(), theirs)
		var fe *blob.ForeignError
		if !errors.As(err, &fe) || fe.Owner != mine || fe.ID != theirs || !strings.Contains(fe.Marker, blob.MarkerName) {
			t.Fatalf("Bind of another database = %#v, want a ForeignError naming both and the marker", err)
		}
		for _, want := range []string{"belongs to another SciMesh database", mine, theirs, "--blobs", "remove the marker"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err, want)
			}
		}
		if got := list(t, s.List); len(got) != 0 {
			t.Errorf("List = %v, want the marker left out", got)
		}
		if got := list(t, s.ListTemp); len(got) != 0 {
			t.Errorf("ListTemp = %v, want nothing left of writing the marker", got)
		}

		fresh, freshDir := rawURL, dataDir
		if dataDir != "" {
			freshDir = t.TempDir()
		} else {
			fresh = s3test.Bucket(t)
		}
		const n = 8
		won := make(chan string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				st, err := blob.Open(t.Context(), fresh, freshDir)
				if err != nil {
					t.Error(err)
					return
				}
				defer st.Close()
				id := fmt.Sprintf("%032x", i+1)
				err = st.Bind(t.Context(), id)
				var lost *blob.ForeignError
				if err == nil {
					won <- id
				} else if !errors.As(err, &lost) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		close(won)
		if len(won) != 1 {
			var ids []string
			for id := range won {
				ids = append(ids, id)
			}
			t.Errorf("%d Binds at once on a fresh store: %v won, want exactly one", n, ids)
		}
	})
}
