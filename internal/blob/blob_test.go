package blob

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestCommitAndOpen(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "id,score\n")
	io.WriteString(w, "a,1\n")
	n, err := w.Commit("u-1")
	if err != nil || n != 13 {
		t.Fatalf("Commit = %d, %v; want 13 bytes", n, err)
	}
	f, err := s.Open("u-1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); string(got) != "id,score\na,1\n" {
		t.Fatalf("read back %q", got)
	}
	w.Abort() // after Commit: a no-op that must not remove the blob
	if _, err := os.Stat(f.Name()); err != nil {
		t.Fatalf("Abort after Commit removed the blob: %v", err)
	}
	w2, _ := s.Create()
	io.WriteString(w2, "other")
	if _, err := w2.Commit("u-1"); err == nil {
		t.Fatal("Commit over a taken name succeeded")
	}
	if got, _ := os.ReadFile(f.Name()); string(got) != "id,score\na,1\n" {
		t.Fatalf("a refused Commit changed the blob: %q", got)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	w, _ := s.Create()
	io.WriteString(w, "partial")
	w.Abort()
	entries, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	if len(entries) != 0 {
		t.Fatalf("Abort left %d temporary files", len(entries))
	}
	w, _ = s.Create()
	if _, err := w.Commit("../escape"); err == nil {
		t.Fatal("Commit accepted a name with a path")
	}
	entries, _ = os.ReadDir(filepath.Join(dir, "tmp"))
	if len(entries) != 0 {
		t.Fatalf("a failed Commit left %d temporary files", len(entries))
	}
}

func TestOpenMissing(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir())
	for _, key := range []string{"../../etc/passwd", "", "u-none", "UPPER"} {
		if _, err := s.Open(key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%q) = %v, want ErrNotFound", key, err)
		}
	}
}

func TestListAndRemove(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"u-a", "u-b"} {
		w, err := s.Create()
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(key))
		if _, err := w.Commit(key); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := s.Create() // a blob being written
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Abort()
	list := func(fn func(func([]Info) error) error) map[string]int64 {
		got := map[string]int64{}
		if err := fn(func(page []Info) error {
			for _, i := range page {
				got[i.Key] = i.Size
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(s.List); len(got) != 2 || got["u-a"] != 3 || got["u-b"] != 3 {
		t.Fatalf("List = %v, want u-a and u-b of 3 bytes", got)
	}
	temp := list(s.ListTemp)
	if len(temp) != 1 {
		t.Fatalf("ListTemp = %v, want the one being written", temp)
	}
	if err := s.Remove("u-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("u-a"); err != nil {
		t.Fatalf("Remove of a removed blob: %v", err)
	}
	if _, err := s.Open("u-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a removed blob = %v, want ErrNotFound", err)
	}
	for name := range temp {
		if err := s.RemoveTemp(name); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(s.ListTemp); len(got) != 0 {
		t.Fatalf("ListTemp after RemoveTemp = %v", got)
	}
	if err := s.RemoveTemp("../files/u-b"); err == nil {
		t.Fatal("RemoveTemp of a path outside the temporary directory succeeded")
	}
	if got := list(s.List); len(got) != 1 {
		t.Fatalf("List after removals = %v, want u-b", got)
	}
}
