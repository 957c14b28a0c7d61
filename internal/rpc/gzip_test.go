package rpc

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/testenv"
)

// TestBoundedGzipStopsAtTheBound inflates a bomb (256 MiB of zeros in a
// few hundred KiB) through the bounded decompressor: it yields the bound
// and one byte more, then fails, having read only the little of the
// compressed stream that those bytes need — it never inflates the rest.
func TestBoundedGzipStopsAtTheBound(t *testing.T) {
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 256 {
		zw.Write(zeros)
	}
	zw.Close()

	const limit = 1 << 20
	src := &testenv.CountingReader{R: bytes.NewReader(bomb.Bytes())}
	d := newBoundedGzip(limit)()
	if err := d.Reset(src); err != nil {
		t.Fatal(err)
	}
	got, err := io.Copy(io.Discard, d)
	if err == nil || !strings.Contains(err.Error(), "inflates to more than") {
		t.Errorf("reading a bomb: err %v, want one saying it inflates past the bound", err)
	}
	if got != limit+1 {
		t.Errorf("yielded %d bytes, want the bound and one more (%d)", got, limit+1)
	}
	if src.N > int64(bomb.Len())/16 {
		t.Errorf("read %d of the bomb's %d compressed bytes: it inflated far past the bound", src.N, bomb.Len())
	}

	// Reused for a message within the bound, it yields all of it.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	zw.Write([]byte("hello"))
	zw.Close()
	if err := d.Reset(&small); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(d); err != nil || string(b) != "hello" {
		t.Errorf("after Reset: %q, %v; want hello", b, err)
	}
}
