package engine_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/blob"
	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/engine"
	"github.com/scimesh/scimesh/internal/s3test"
)

// TestUploadToBucket streams tables into a real S3 bucket: a good one is
// one object, normalized, and its chunks read back by range; a malformed
// one, and one whose sender goes away, are refused and leave nothing in
// the bucket, not even an unfinished upload.
func TestUploadToBucket(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bucket, err := blob.OpenBucket(ctx, s3test.Bucket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	e := newEngine(openStore(t), engine.Config{Blobs: bucket})

	count := func(list func(context.Context, func([]blob.Info) error) error) int {
		t.Helper()
		n := 0
		if err := list(ctx, func(page []blob.Info) error { n += len(page); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	keys := func() (objects, leftovers int) { return count(bucket.List), count(bucket.ListTemp) }

	// Large enough for several parts of a multipart upload, with the
	// bad record at its end.
	var sb strings.Builder
	sb.WriteString("id,x\r\n")
	for range 1_200_000 {
		sb.WriteString("row-xxxxxxxxxxxxxxxxxxxx,1\r\n")
	}
	good := sb.String()
	if _, err := e.CreateUpload(ctx, strings.NewReader(good+"bad,1,2\n")); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("CreateUpload of a malformed table = %v, want ErrInvalidArgument", err)
	}
	if o, l := keys(); o != 0 || l != 0 {
		t.Fatalf("a refused upload left %d objects and %d unfinished uploads", o, l)
	}
	cut := io.MultiReader(strings.NewReader(good), errReader{errors.New("the client went away")})
	if _, err := e.CreateUpload(ctx, cut); err == nil {
		t.Fatal("CreateUpload of a body cut short succeeded")
	}
	if o, l := keys(); o != 0 || l != 0 {
		t.Fatalf("an upload cut short left %d objects and %d unfinished uploads", o, l)
	}

	u, err := e.CreateUpload(ctx, strings.NewReader("id,x\r\na,1\r\n\"b\",2\r\nc,3\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o, l := keys(); o != 1 || l != 0 {
		t.Fatalf("after an upload: %d objects and %d unfinished uploads, want 1 and 0", o, l)
	}
	sp := spec(0)
	sp.Chunks, sp.UploadID, sp.ChunkRows = nil, u.ID, 2
	v, _, err := e.CreateJob(ctx, sp, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 2 {
		in, err := e.OpenTaskInput(ctx, v.ID+"-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(in)
		in.Close()
		if err != nil || int64(len(b)) != in.Size {
			t.Fatalf("chunk %d: %d bytes, %v; want %d", i, len(b), err, in.Size)
		}
		got = append(got, string(b))
	}
	if want := []string{"id,x\na,1\nb,2\n", "id,x\nc,3\n"}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("chunks read from the bucket = %q, want %q", got, want)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
