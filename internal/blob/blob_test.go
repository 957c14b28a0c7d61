package blob

import (
	"crypto/sha256"
	"encoding/hex"
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
	key, n, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("id,score\na,1\n"))
	if key != hex.EncodeToString(sum[:]) || n != 13 {
		t.Fatalf("Commit = %s, %d; want the content's sha256 and 13 bytes", key, n)
	}
	f, err := s.Open(key)
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
}

func TestOpenMissing(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir())
	for _, key := range []string{"../../etc/passwd", "00", "0000000000000000000000000000000000000000000000000000000000000000"} {
		if _, err := s.Open(key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%q) = %v, want ErrNotFound", key, err)
		}
	}
}
