package engine_test

import (
	"context"
	"errors"
	"io"
	"net/http"
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
	if _, err := e.CreateUpload(ctx, strings.NewReader(good+"bad,1,2\n"), -1); !errors.Is(err, domain.ErrInvalidArgument) {
		t.Fatalf("CreateUpload of a malformed table = %v, want ErrInvalidArgument", err)
	}
	if o, l := keys(); o != 0 || l != 0 {
		t.Fatalf("a refused upload left %d objects and %d unfinished uploads", o, l)
	}
	cut := io.MultiReader(strings.NewReader(good), errReader{errors.New("the client went away")})
	if _, err := e.CreateUpload(ctx, cut, -1); err == nil {
		t.Fatal("CreateUpload of a body cut short succeeded")
	}
	if o, l := keys(); o != 0 || l != 0 {
		t.Fatalf("an upload cut short left %d objects and %d unfinished uploads", o, l)
	}

	u, err := e.CreateUpload(ctx, strings.NewReader("id,x\r\na,1\r\n\"b\",2\r\nc,3\r\n"), -1)
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

// TestPresign hands out signed inputs for chunks of an upload in a bucket:
// the claim's input reads exactly its chunk's range, and the header line
// comes with it. A header that is not UTF-8, which JSON cannot carry as
// it is, falls back to the coordinator's /tasks/{id}/input.
func TestPresign(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bucket, err := blob.OpenBucket(ctx, s3test.Bucket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	e := newEngine(openStore(t), engine.Config{Blobs: bucket, Presign: true})
	claim := func(table, workload string) *engine.TaskView {
		t.Helper()
		u, err := e.CreateUpload(ctx, strings.NewReader(table), -1)
		if err != nil {
			t.Fatal(err)
		}
		sp := spec(0)
		sp.Chunks, sp.UploadID, sp.ChunkRows, sp.Workload = nil, u.ID, 1, workload
		if _, _, err := e.CreateJob(ctx, sp, ""); err != nil {
			t.Fatal(err)
		}
		tasks, err := e.ClaimTasks(ctx, engine.ClaimTasksParams{WorkerID: "w", Max: 2, Workloads: []string{workload}})
		if err != nil || len(tasks) != 2 {
			t.Fatalf("claim: %d tasks, %v", len(tasks), err)
		}
		return tasks[1]
	}
	v := claim("id,x\na,1\nb,2\n", "good")
	if v.Input == nil || string(v.Input.Header) != "id,x\n" || v.Input.Range != "bytes=9-12" {
		t.Fatalf("signed input of chunk 1 = %+v, want the header line and bytes=9-12 (the blob holds the header too)", v.Input)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, v.Input.URL, nil)
	req.Header.Set("Range", v.Input.Range)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(v.Input.Header)+string(body) != "id,x\nb,2\n" {
		t.Fatalf("GET of the signed input: %d %q", resp.StatusCode, body)
	}
	if v := claim("id,temp\xb0C\na,1\nb,2\n", "latin1"); v.Input != nil {
		t.Fatalf("a chunk whose header is not UTF-8 was signed: %+v", v.Input)
	}
}
